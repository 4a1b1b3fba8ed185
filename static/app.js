// Progressive enhancement only: every feature works without this file.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Blank fields mean "no filter"; leave them out so the URL stays short and canonical.
  var form = document.getElementById("filters");
  if (form) {
    form.addEventListener("submit", function () {
      Array.prototype.forEach.call(form.elements, function (el) {
        if (el.name && (el.tagName === "INPUT" || el.tagName === "SELECT") &&
            el.type !== "checkbox" && el.type !== "radio" && el.value.trim() === "") {
          el.disabled = true;
        }
      });
      // Re-enable after the navigation starts, so the back button shows a usable form.
      setTimeout(function () {
        Array.prototype.forEach.call(form.elements, function (el) { el.disabled = false; });
      }, 0);
    });
    // Ticking a facet value or switching the job applies it at once.
    form.addEventListener("change", function (event) {
      var t = event.target;
      if (t.type === "checkbox" || t.type === "radio" || t.tagName === "SELECT") {
        if (typeof form.requestSubmit === "function") { form.requestSubmit(); } else { form.submit(); }
      }
    });
    // A preset and a custom size are alternatives: choosing one clears the other.
    var model = form.elements.namedItem("model");
    var size = form.elements.namedItem("params_b");
    if (model && size) {
      size.addEventListener("input", function () { if (size.value) { model.value = ""; } });
      model.addEventListener("change", function () { if (model.value) { size.value = ""; } }, true);
    }
  }

  // On a phone the results matter first: start with the filters folded away.
  var toggle = document.querySelector(".filters-toggle");
  if (toggle && window.matchMedia && window.matchMedia("(max-width: 900px)").matches) {
    toggle.open = false;
  }

  // Long facet lists show their most common values; a button reveals the rest.
  Array.prototype.forEach.call(document.querySelectorAll(".facet-more-hint"), function (hint) {
    var list = hint.previousElementSibling;
    var button = hint.querySelector(".show-more");
    if (!list || !button) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      list.classList.add("expanded");
      hint.hidden = true;
    });
  });

  // Ask before deleting a saved search.
  Array.prototype.forEach.call(document.querySelectorAll("form.confirm"), function (f) {
    f.addEventListener("submit", function (event) {
      if (!window.confirm(f.getAttribute("data-confirm") || "Are you sure?")) { event.preventDefault(); }
    });
  });
})();

"""The database: schema, engine, migrations, data-version caches; may import only app.core."""

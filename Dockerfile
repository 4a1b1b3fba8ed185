# Production image for docker-compose.yml (web, worker and the migrate step share it).
FROM python:3.11-slim
WORKDIR /srv/gpufit
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY app ./app
COPY scrapers ./scrapers
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
RUN pip install --no-cache-dir -e .
USER nobody
EXPOSE 8000
CMD ["gpufit", "serve", "--host", "0.0.0.0"]

# The `evaltrace worker` image used by docker-compose.yml (profile "eval"); build context = repository root.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir ".[worker]"
EXPOSE 4317 4318
ENTRYPOINT ["evaltrace", "worker"]

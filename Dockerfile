# clawgate in a container: slim Python, a non-root user, workspaces on a volume.
#   docker build -t clawgate .
#   docker run -it -e ANTHROPIC_API_KEY=... -v clawgate-data:/data clawgate
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CLAWGATE_WORKSPACES_DIR=/data/workspaces

RUN useradd --create-home --uid 10001 clawgate \
    && mkdir -p /data/workspaces \
    && chown -R clawgate:clawgate /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY channels ./channels
COPY memory ./memory
COPY heartbeat ./heartbeat
RUN pip install .

USER clawgate
VOLUME ["/data"]
CMD ["clawgate", "run"]

# clawgate in a container: slim Python, a non-root user, workspaces on a volume.
#   docker build -t clawgate .
#   docker run -it -e ANTHROPIC_API_KEY=... -v clawgate-data:/data clawgate
# With Telegram/Discord configured, docker-compose.yml runs it detached with a health check.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CLAWGATE_WORKSPACES_DIR=/data/workspaces

# git: each workspace is a repository (history and `clawgate memory undo`); without it
# versioning is off with one warning. bubblewrap: the sandbox that commands run in (it needs
# user namespaces: Docker's default seccomp profile may refuse them).
RUN apt-get update \
    && apt-get install -y --no-install-recommends git bubblewrap \
    && rm -rf /var/lib/apt/lists/*

# The workspaces belong to uid 10001: a bind mount (-v ./data:/data) must be writable by it
# (`sudo chown -R 10001 ./data` on the host), a named volume is set up by Docker.
RUN useradd --create-home --uid 10001 clawgate \
    && mkdir -p /data/workspaces \
    && chown -R clawgate:clawgate /data

WORKDIR /app
# Dependencies first, from pyproject.toml alone: a change to the code reuses this layer
# instead of downloading and installing every dependency again.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY README.md ./
COPY gateway ./gateway
COPY channels ./channels
COPY memory ./memory
COPY heartbeat ./heartbeat
COPY scheduler ./scheduler
COPY retrypolicy ./retrypolicy
RUN pip install --no-deps .

USER clawgate
VOLUME ["/data"]
# /healthz, /readyz, /metrics (set CLAWGATE_HEALTH__HOST=0.0.0.0 to reach them from outside)
EXPOSE 8787 8788
CMD ["clawgate", "run"]

# bpmon in a container: the CLI, with a Java runtime for Spark's local mode.
#   docker build -t bpmon .
#   docker run --rm bpmon demo
#   docker run --rm --cap-add SYS_PTRACE --pid=host bpmon monitor --pid PID   (watch a host process)
FROM python:3.11-slim

# Spark (history analytics) runs on the JVM; procps gives py-spy's error messages a `ps` to use.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/bpmon
COPY pyproject.toml README.md ./
COPY bpmon ./bpmon
COPY rules ./rules
COPY collectors ./collectors
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 bpmon
USER 10001
WORKDIR /home/bpmon
ENTRYPOINT ["bpmon"]
CMD ["--help"]

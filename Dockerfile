# bpmon in a container: the CLI with every extra, and a Java runtime for Spark's local mode.
#   docker build -t bpmon .
#   docker run --rm bpmon demo
#   docker run --rm --cap-add SYS_PTRACE --pid=host bpmon monitor --pid PID   (watch a host process)
#   docker run --rm -v "$PWD/my-data:/data" -e BPMON_DATA_DIR=/data bpmon run demo
#       (your own rules/ and collectors/ files override the shipped ones)
# The Debian release is pinned: bookworm has openjdk-17, the newer release behind the unpinned
# slim tag has not.
FROM python:3.11-slim-bookworm

# Spark runs on the JVM; procps gives py-spy's error messages a `ps`; libcap2-bin has setcap.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps libcap2-bin \
    && rm -rf /var/lib/apt/lists/*

# A regular (non-editable) install: the shipped rules and profiles travel inside the package
# (bpmon/data/* are symlinks to the top-level folders, copied through when the wheel is built).
WORKDIR /tmp/bpmon-src
COPY pyproject.toml README.md ./
COPY rules ./rules
COPY collectors ./collectors
COPY dashboards ./dashboards
COPY bpmon ./bpmon

# `bpmon monitor` runs py-spy, which needs CAP_SYS_PTRACE to read another process. `docker run
# --cap-add SYS_PTRACE` only adds it to the bounding set: a non-root user's effective set stays
# empty, so py-spy would still be denied. Rather than run the whole CLI as root, py-spy alone
# carries the capability as a file capability (+ep): it becomes effective when the container was
# granted it, and the kernel refuses to start py-spy when it was not. py-spy must also read the
# target's interpreter files: system and container Pythons are world-readable; for one in another
# user's private home, add `--user root`.
RUN pip install --no-cache-dir './[all]' \
    && setcap cap_sys_ptrace+ep "$(command -v py-spy)" \
    && useradd --create-home --uid 10001 bpmon \
    && rm -rf /tmp/bpmon-src

USER 10001
WORKDIR /home/bpmon
ENTRYPOINT ["bpmon"]
CMD ["--help"]

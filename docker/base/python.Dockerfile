# What python:3.11-slim-bookworm provides, from Debian's own packages: Python 3.11 (Debian bookworm's),
# venv and pip, the CA certificates, and `python` on the PATH. Built by docker/images.sh where no image
# registry is reachable, on the lakefeed/debian:bookworm base it makes with debootstrap.
FROM lakefeed/debian:bookworm
LABEL org.lakefeed.stack=true
ENV LANG=C.UTF-8
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip ca-certificates \
 && ln -s /usr/bin/python3 /usr/local/bin/python \
 && rm -rf /var/lib/apt/lists/*
CMD ["python3"]

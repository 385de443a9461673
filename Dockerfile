# drover worker image: the drover binary plus the pinned Claude Code CLI.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/drover ./cmd/drover

FROM node:20-bookworm-slim
ARG CLAUDE_CODE_VERSION=2.1.332
# git drives managed workspaces (drover task start --repo). The folders below are the mount points of
# docker-compose.yml's volumes, made here so that a new volume belongs to the drover user.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates openssh-client \
 && rm -rf /var/lib/apt/lists/*
RUN npm install -g --no-audit --no-fund "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
 && useradd --create-home --uid 10001 drover \
 && mkdir -p /var/lib/drover/claude /var/lib/drover/remote /var/lib/drover/archive /workspaces \
 && chown -R drover:drover /var/lib/drover /workspaces
COPY --from=build /out/drover /usr/local/bin/drover
USER drover
ENV DROVER_CLAUDE_BIN=/usr/local/bin/claude \
    DISABLE_AUTOUPDATER=1 \
    DISABLE_TELEMETRY=1 \
    DISABLE_ERROR_REPORTING=1
ENTRYPOINT ["drover"]
CMD ["worker"]

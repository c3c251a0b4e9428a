# Multi-arch builds of every MoTS image (linux/amd64 for the control-plane server, linux/arm64 for
# the Raspberry Pis; every image gets both so that any node can run any of them).
#
#   docker buildx create --use --name mots    # once; QEMU binfmt for the foreign architecture
#   REGISTRY=registry.example.org/mots VERSION=0.1.0 \
#     docker buildx bake -f docker/docker-bake.hcl --push
#
# Run from the repository root: every context is the root and each Dockerfile lives in docker/.

variable "REGISTRY" {
  default = "localhost:5000/mots"
}

variable "VERSION" {
  default = "dev"
}

variable "PLATFORMS" {
  default = "linux/amd64,linux/arm64"
}

group "default" {
  targets = ["market", "pricing", "orchestration", "evaluation", "superlink", "edge"]
}

group "control-plane" {
  targets = ["market", "pricing", "orchestration", "evaluation", "superlink"]
}

target "_common" {
  context   = "."
  platforms = split(",", PLATFORMS)
  labels = {
    "org.opencontainers.image.version" = "${VERSION}"
    "org.opencontainers.image.source"  = "mots-platform"
  }
}

# The four services share docker/service/Dockerfile; their args say what differs (compose's builds
# pass the same ones). The SuperLink and the edge node have Dockerfiles of their own.
target "_service" {
  inherits   = ["_common"]
  dockerfile = "docker/service/Dockerfile"
}

target "market" {
  inherits = ["_service"]
  tags     = ["${REGISTRY}/market:${VERSION}"]
  args = {
    SERVICE = "market"
  }
}

target "pricing" {
  inherits = ["_service"]
  tags     = ["${REGISTRY}/pricing:${VERSION}"]
  args = {
    SERVICE = "pricing"
  }
}

target "orchestration" {
  inherits = ["_service"]
  tags     = ["${REGISTRY}/orchestration:${VERSION}"]
  args = {
    SERVICE  = "orchestration"
    TRAINING = "true"
    EDGE     = "true"
  }
}

# A Celery worker only: no API; its /metrics endpoint doubles as the health check.
target "evaluation" {
  inherits = ["_service"]
  tags     = ["${REGISTRY}/evaluation:${VERSION}"]
  args = {
    SERVICE    = "evaluation"
    TRAINING   = "true"
    COMMAND    = "celery -A services.evaluation.worker worker -Q evaluation --pool=solo --loglevel=INFO"
    PORT       = "9100"
    HEALTH_URL = "http://127.0.0.1:9100/metrics"
  }
}

target "superlink" {
  inherits   = ["_common"]
  dockerfile = "docker/superlink/Dockerfile"
  tags       = ["${REGISTRY}/superlink:${VERSION}"]
}

target "edge" {
  inherits   = ["_common"]
  dockerfile = "docker/edge/Dockerfile"
  tags       = ["${REGISTRY}/edge:${VERSION}"]
}

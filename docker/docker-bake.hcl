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

target "market" {
  inherits   = ["_common"]
  dockerfile = "docker/market/Dockerfile"
  tags       = ["${REGISTRY}/market:${VERSION}"]
}

target "pricing" {
  inherits   = ["_common"]
  dockerfile = "docker/pricing/Dockerfile"
  tags       = ["${REGISTRY}/pricing:${VERSION}"]
}

target "orchestration" {
  inherits   = ["_common"]
  dockerfile = "docker/orchestration/Dockerfile"
  tags       = ["${REGISTRY}/orchestration:${VERSION}"]
}

target "evaluation" {
  inherits   = ["_common"]
  dockerfile = "docker/evaluation/Dockerfile"
  tags       = ["${REGISTRY}/evaluation:${VERSION}"]
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

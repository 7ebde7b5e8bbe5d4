# `make images-check`: build the trainer and components images on this machine, without
# Docker, and run the compiled pipeline's steps and a Vertex trial from them
# (images/check.py). Included by the main Makefile after images/images.mk.
#
# Tools: Debian's buildah and mmdebstrap (apt-get install buildah mmdebstrap), run as root.
# Network: Debian's mirror (the base root filesystem) and the Python package index (the
# Dockerfiles' own `pip install` lines); Docker Hub is not needed. Cost on 2 cores: see
# images/README.md ("Built and run here").
#
# Storage is private to the checkout's user (IMAGES_STORE), overlay driver, layers cached:
# a second `make images-check` rebuilds only what changed.
IMAGES_STORE   ?= /var/tmp/hpt-images
DEBIAN_MIRROR  ?= http://deb.debian.org/debian
BASE_IMAGE     ?= localhost/hpt/python-base:3.11-bookworm
LOCAL_TRAINER_IMAGE    ?= localhost/hpt/trainer:local
LOCAL_COMPONENTS_IMAGE ?= localhost/hpt/components:local
# The build's HTTPS trust: the host's CA bundle (here it holds an egress proxy's CA) is
# bind-mounted over the image's bundle for the RUN steps only (Debian's pip reads
# /etc/ssl/certs/ca-certificates.crt), so nothing of this host ends up in an image.
CA_BUNDLE      ?= /etc/ssl/certs/ca-certificates.crt
PIP_CA_PATH    := /etc/ssl/certs/ca-certificates.crt
BUILDAH         = buildah --root $(IMAGES_STORE)/storage --runroot $(IMAGES_STORE)/run \
                  --storage-driver overlay
BUD             = $(BUILDAH) bud --isolation chroot --layers \
                  --build-arg PYTHON_IMAGE=$(BASE_IMAGE) -v $(CA_BUNDLE):$(PIP_CA_PATH):ro
IMAGES_CHECK_ARGS ?=

.PHONY: images-base images-build images-check images-sizes

$(IMAGES_STORE)/base/base-rootfs.tar:
	mkdir -p $(@D)
	mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates,passwd \
	    bookworm $@.part $(DEBIAN_MIRROR)
	mv $@.part $@

images-base: $(IMAGES_STORE)/base/base-rootfs.tar ## The local python:3.11-slim stand-in (Debian bookworm, mmdebstrap)
	$(BUILDAH) bud --isolation chroot --layers -f images/base/Containerfile \
	    -t $(BASE_IMAGE) $(IMAGES_STORE)/base

images-build: images-base ## Build both images here with buildah (cached layers)
	$(BUD) -f images/components/Dockerfile -t $(LOCAL_COMPONENTS_IMAGE) .
	$(BUD) -f images/trainer/Dockerfile -t $(LOCAL_TRAINER_IMAGE) .
	$(BUILDAH) images

IMAGES_WORK    ?= $(IMAGES_STORE)/check

images-check: $(STAMP) images-build ## Build the images, run every compiled step + a trial from them
	rm -rf $(IMAGES_WORK)
	HPT_IMAGES_WORK=$(IMAGES_WORK) HPT_IMAGES_CHECK_ARGS='--buildah "$(BUILDAH)" --components $(LOCAL_COMPONENTS_IMAGE) --trainer $(LOCAL_TRAINER_IMAGE) $(IMAGES_CHECK_ARGS)' \
	    $(PY) -m pytest -s -p no:cacheprovider -m images tests/test_image_steps.py
	$(BUILDAH) images

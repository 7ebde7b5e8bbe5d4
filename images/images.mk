# Container images: `make images` builds and pushes the trainer and components images,
# `make image-uris` prints their URIs. Included by the main Makefile:
#   include images/images.mk
# Uses $(VENV)/$(PY) from the main Makefile (defaults below for standalone use).
#
#   make images PROJECT=my-project [REGION=us-central1] [REPOSITORY=hpt-pipeline] [TAG=...]
#
# With Cloud Build (cloudbuild.yaml) unless a local Docker engine is used: USE_DOCKER=1
# forces Docker, USE_DOCKER=0 forces Cloud Build, unset picks Docker when `docker info`
# succeeds. `make -n images ...` prints the commands without running them.
VENV       ?= .venv
PY         ?= $(VENV)/bin/python
PROJECT    ?=
REGION     ?= us-central1
REPOSITORY ?= hpt-pipeline
TAG        ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo latest)
USE_DOCKER ?= $(if $(shell docker info >/dev/null 2>&1 && echo yes),1,0)

REGISTRY         = $(REGION)-docker.pkg.dev/$(PROJECT)/$(REPOSITORY)
TRAINER_IMAGE    = $(REGISTRY)/trainer:$(TAG)
COMPONENTS_IMAGE = $(REGISTRY)/components:$(TAG)
NEED_PROJECT     = $(if $(PROJECT),,$(error PROJECT is not set: make $@ PROJECT=my-gcp-project [REGION=$(REGION)] [TAG=$(TAG)]))

define DOCKER_IMAGES
docker build --platform=linux/amd64 -f images/trainer/Dockerfile -t $(TRAINER_IMAGE) .
docker build --platform=linux/amd64 -f images/components/Dockerfile -t $(COMPONENTS_IMAGE) .
docker push $(TRAINER_IMAGE)
docker push $(COMPONENTS_IMAGE)
endef

define CLOUD_BUILD_IMAGES
gcloud builds submit --project=$(PROJECT) --region=$(REGION) --config=cloudbuild.yaml \
  --substitutions=_REGION=$(REGION),_REPOSITORY=$(REPOSITORY),_TAG=$(TAG) .
endef

.PHONY: images image-uris

images: ## Build + push the trainer/components images (Cloud Build, or Docker: USE_DOCKER=1)
	$(NEED_PROJECT)
	$(if $(filter 1,$(USE_DOCKER)),$(DOCKER_IMAGES),$(CLOUD_BUILD_IMAGES))

image-uris: ## Print the image URIs as HPT_*_IMAGE=... lines (PROJECT, REGION, TAG)
	$(NEED_PROJECT)
	@$(PY) -m pipelines.images uris --registry=$(REGISTRY) --tag=$(TAG)

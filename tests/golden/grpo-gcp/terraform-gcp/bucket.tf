# Checkpoint bucket and its lifecycle: the plan's storage tiers and retention (docs/render.md).
# note: retained_checkpoints: priced NEARLINE, kept STANDARD (an age rule cannot tell them from the last 3 checkpoints, which the plan prices STANDARD to the end); storage may cost a little more than planned

resource "google_storage_bucket" "checkpoints" {
  name                        = var.bucket_name
  location                    = "NORTHAMERICA-NORTHEAST2"
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  labels                      = { "ptplan-capacity-type" = "none", "ptplan-method" = "rl", "ptplan-phase" = "checkpoint", "ptplan-plan" = "grpo-7b-math-cbccb2", "ptplan-pool" = "storage", "ptplan-project" = "grpo-7b-math" }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 31
      matches_prefix = ["grpo-7b-math/checkpoints/"]
    }
  }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "ARCHIVE"
    }
    condition {
      age            = 0
      matches_prefix = ["grpo-7b-math/archive/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 365
      matches_prefix = ["grpo-7b-math/archive/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 14
      matches_prefix = ["grpo-7b-math/rollout_logs/"]
    }
  }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "ARCHIVE"
    }
    condition {
      age            = 0
      matches_prefix = ["grpo-7b-math/eval/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 365
      matches_prefix = ["grpo-7b-math/eval/"]
    }
  }

  lifecycle_rule {
    action {
      type = "AbortIncompleteMultipartUpload"
    }
    condition {
      age            = 7
      matches_prefix = ["grpo-7b-math/"]
    }
  }
}

# Checkpoint bucket and its lifecycle: the plan's storage tiers and retention (docs/render.md).

resource "google_storage_bucket" "checkpoints" {
  name                        = var.bucket_name
  location                    = "US-CENTRAL1"
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  labels                      = { "ptplan-capacity-type" = "none", "ptplan-method" = "opd", "ptplan-phase" = "checkpoint", "ptplan-plan" = "opd-8b-from-32b-7c25ba", "ptplan-pool" = "storage", "ptplan-project" = "opd-8b-from-32b" }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "NEARLINE"
    }
    condition {
      age            = 0
      matches_prefix = ["opd-8b-from-32b/checkpoints/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 31
      matches_prefix = ["opd-8b-from-32b/checkpoints/"]
    }
  }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "ARCHIVE"
    }
    condition {
      age            = 0
      matches_prefix = ["opd-8b-from-32b/archive/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 365
      matches_prefix = ["opd-8b-from-32b/archive/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 14
      matches_prefix = ["opd-8b-from-32b/rollout_logs/"]
    }
  }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "ARCHIVE"
    }
    condition {
      age            = 0
      matches_prefix = ["opd-8b-from-32b/eval/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 365
      matches_prefix = ["opd-8b-from-32b/eval/"]
    }
  }

  lifecycle_rule {
    action {
      type = "AbortIncompleteMultipartUpload"
    }
    condition {
      age            = 7
      matches_prefix = ["opd-8b-from-32b/"]
    }
  }
}

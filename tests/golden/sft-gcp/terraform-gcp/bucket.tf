# Checkpoint bucket and its lifecycle: the plan's storage tiers and retention (docs/render.md).

resource "google_storage_bucket" "checkpoints" {
  name                        = var.bucket_name
  location                    = "US-CENTRAL1"
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  labels                      = { "ptplan-capacity-type" = "none", "ptplan-method" = "sft", "ptplan-phase" = "checkpoint", "ptplan-plan" = "sft-8b-chat-1838ad", "ptplan-pool" = "storage", "ptplan-project" = "sft-8b-chat" }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "COLDLINE"
    }
    condition {
      age            = 0
      matches_prefix = ["sft-8b-chat/checkpoints/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 61
      matches_prefix = ["sft-8b-chat/checkpoints/"]
    }
  }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "ARCHIVE"
    }
    condition {
      age            = 0
      matches_prefix = ["sft-8b-chat/archive/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 365
      matches_prefix = ["sft-8b-chat/archive/"]
    }
  }

  lifecycle_rule {
    action {
      type          = "SetStorageClass"
      storage_class = "ARCHIVE"
    }
    condition {
      age            = 0
      matches_prefix = ["sft-8b-chat/eval/"]
    }
  }

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age            = 365
      matches_prefix = ["sft-8b-chat/eval/"]
    }
  }

  lifecycle_rule {
    action {
      type = "AbortIncompleteMultipartUpload"
    }
    condition {
      age            = 7
      matches_prefix = ["sft-8b-chat/"]
    }
  }
}

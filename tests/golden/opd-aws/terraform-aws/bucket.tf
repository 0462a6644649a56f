# Checkpoint bucket and its lifecycle: the plan's storage tiers and retention (docs/render.md).
# note: retained_checkpoints: priced GLACIER_IR, kept STANDARD (an age rule cannot tell them from the last 3 checkpoints, which the plan prices STANDARD to the end); storage may cost a little more than planned

resource "aws_s3_bucket" "checkpoints" {
  bucket = var.bucket_name
  tags   = { "ptplan-capacity-type" = "none", "ptplan-method" = "opd", "ptplan-phase" = "checkpoint", "ptplan-plan" = "opd-8b-from-32b-30fa41", "ptplan-pool" = "storage", "ptplan-project" = "opd-8b-from-32b" }
}

resource "aws_s3_bucket_lifecycle_configuration" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id

  rule {
    id     = "checkpoints"
    status = "Enabled"
    filter {
      prefix = "opd-8b-from-32b/checkpoints/"
    }
    expiration {
      days = 31
    }
  }

  rule {
    id     = "archived-checkpoints"
    status = "Enabled"
    filter {
      prefix = "opd-8b-from-32b/archive/"
    }
    transition {
      days          = 0
      storage_class = "DEEP_ARCHIVE"
    }
    expiration {
      days = 365
    }
  }

  rule {
    id     = "rollout-logs"
    status = "Enabled"
    filter {
      prefix = "opd-8b-from-32b/rollout_logs/"
    }
    transition {
      days          = 0
      storage_class = "DEEP_ARCHIVE"
    }
    expiration {
      days = 14
    }
  }

  rule {
    id     = "eval-outputs"
    status = "Enabled"
    filter {
      prefix = "opd-8b-from-32b/eval/"
    }
    transition {
      days          = 0
      storage_class = "DEEP_ARCHIVE"
    }
    expiration {
      days = 365
    }
  }

  rule {
    id     = "abort-incomplete-uploads"
    status = "Enabled"
    filter {
      prefix = "opd-8b-from-32b/"
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

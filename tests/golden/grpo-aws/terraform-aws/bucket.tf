# Checkpoint bucket and its lifecycle: the plan's storage tiers and retention (docs/render.md).
# note: retained_checkpoints: priced GLACIER_IR, kept STANDARD (an age rule cannot tell them from the last 3 checkpoints, which the plan prices STANDARD to the end); storage may cost a little more than planned

resource "aws_s3_bucket" "checkpoints" {
  bucket = var.bucket_name
  tags   = { "ptplan-capacity-type" = "none", "ptplan-method" = "rl", "ptplan-phase" = "checkpoint", "ptplan-plan" = "grpo-7b-math-fb7190", "ptplan-pool" = "storage", "ptplan-project" = "grpo-7b-math" }
}

resource "aws_s3_bucket_lifecycle_configuration" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id

  rule {
    id     = "checkpoints"
    status = "Enabled"
    filter {
      prefix = "grpo-7b-math/checkpoints/"
    }
    expiration {
      days = 31
    }
  }

  rule {
    id     = "archived-checkpoints"
    status = "Enabled"
    filter {
      prefix = "grpo-7b-math/archive/"
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
      prefix = "grpo-7b-math/rollout_logs/"
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
      prefix = "grpo-7b-math/eval/"
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
      prefix = "grpo-7b-math/"
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

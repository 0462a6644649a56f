# One GKE node pool per group (plan pool, capacity type, zone, machine type) in the plan's zone.
# Pools scale from zero up to the plan's nodes while the job's pods wait and back to zero when the job ends.

# pool rollout (rollout, eval, weight_sync): 1 x a3-highgpu-2g spot in us-west4-a
resource "google_container_node_pool" "r_grpo_7b_math_0706a3_rollout_spot" {
  name     = "grpo-7b-math-0706a3-rollout-spot"
  cluster  = var.cluster
  location = "us-west4"
  node_locations = ["us-west4-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 1
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "a3-highgpu-2g"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "grpo-7b-math-0706a3-rollout-spot", "ptplan.io/pool" = "rollout" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "rl", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-plan" = "grpo-7b-math-0706a3", "ptplan-pool" = "rollout", "ptplan-project" = "grpo-7b-math" }
    disk_size_gb    = 200
    disk_type       = "pd-balanced"

    guest_accelerator {
      type  = "nvidia-h100-80gb"
      count = 2
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    gvnic {
      enabled = true
    }
  }
}

# pool scoring (scoring): 8 x g2-standard-4 spot in us-west4-a
resource "google_container_node_pool" "r_grpo_7_0706a3_scoring_spot_g2_standard_4" {
  name     = "grpo-7-0706a3-scoring-spot-g2-standard-4"
  cluster  = var.cluster
  location = "us-west4"
  node_locations = ["us-west4-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 8
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "g2-standard-4"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "grpo-7-0706a3-scoring-spot-g2-standard-4", "ptplan.io/pool" = "scoring" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "rl", "ptplan-phase" = "scoring", "ptplan-plan" = "grpo-7b-math-0706a3", "ptplan-pool" = "scoring", "ptplan-project" = "grpo-7b-math" }
    disk_size_gb    = 200
    disk_type       = "pd-balanced"

    guest_accelerator {
      type  = "nvidia-l4"
      count = 1
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    gvnic {
      enabled = true
    }
  }
}

# pool scoring (scoring): 4 x g2-standard-8 spot in us-west4-a
resource "google_container_node_pool" "r_grpo_7_0706a3_scoring_spot_g2_standard_8" {
  name     = "grpo-7-0706a3-scoring-spot-g2-standard-8"
  cluster  = var.cluster
  location = "us-west4"
  node_locations = ["us-west4-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 4
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "g2-standard-8"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "grpo-7-0706a3-scoring-spot-g2-standard-8", "ptplan.io/pool" = "scoring" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "rl", "ptplan-phase" = "scoring", "ptplan-plan" = "grpo-7b-math-0706a3", "ptplan-pool" = "scoring", "ptplan-project" = "grpo-7b-math" }
    disk_size_gb    = 200
    disk_type       = "pd-balanced"

    guest_accelerator {
      type  = "nvidia-l4"
      count = 1
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    gvnic {
      enabled = true
    }
  }
}

# pool update (update, checkpoint): 1 x a3-edgegpu-8g-nolssd on-demand in us-west4-a
resource "google_container_node_pool" "r_grpo_7b_math_0706a3_update_on_demand" {
  name     = "grpo-7b-math-0706a3-update-on-demand"
  cluster  = var.cluster
  location = "us-west4"
  node_locations = ["us-west4-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 1
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "a3-edgegpu-8g-nolssd"
    spot            = false
    labels          = { "ptplan.io/capacity-type" = "on-demand", "ptplan.io/group" = "grpo-7b-math-0706a3-update-on-demand", "ptplan.io/pool" = "update" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "rl", "ptplan-phase" = "update-checkpoint", "ptplan-plan" = "grpo-7b-math-0706a3", "ptplan-pool" = "update", "ptplan-project" = "grpo-7b-math" }
    disk_size_gb    = 200
    disk_type       = "pd-balanced"

    guest_accelerator {
      type  = "nvidia-h100-80gb"
      count = 8
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    gvnic {
      enabled = true
    }
  }
}

# One GKE node pool per plan pool, capacity type and machine type; fixed size = the plan's nodes.

# pool rollout (rollout, eval, weight_sync): 3 x g2-standard-4 spot
resource "google_container_node_pool" "r_rollout_spot" {
  name     = "rollout-spot"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a"]

  autoscaling {
    total_min_node_count = 3
    total_max_node_count = 3
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "g2-standard-4"
    spot            = true
    labels          = { "ptplan-capacity-type" = "spot", "ptplan-method" = "rl", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "grpo-7b-math" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "rl", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "grpo-7b-math" }
    disk_size_gb    = 500

    guest_accelerator {
      type  = "nvidia-l4"
      count = 1
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    taint {
      key    = "cloud.google.com/gke-spot"
      value  = "true"
      effect = "NO_SCHEDULE"
    }
  }
}

# pool update (scoring, update, checkpoint): 1 x a3-highgpu-2g on-demand
resource "google_container_node_pool" "r_update_on_demand" {
  name     = "update-on-demand"
  cluster  = var.cluster
  location = "us-central1"

  autoscaling {
    total_min_node_count = 1
    total_max_node_count = 1
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "a3-highgpu-2g"
    spot            = false
    labels          = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "rl", "ptplan-phase" = "scoring-update-checkpoint", "ptplan-pool" = "update", "ptplan-project" = "grpo-7b-math" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "rl", "ptplan-phase" = "scoring-update-checkpoint", "ptplan-pool" = "update", "ptplan-project" = "grpo-7b-math" }
    disk_size_gb    = 500

    guest_accelerator {
      type  = "nvidia-h100-80gb"
      count = 2
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }
  }
}

# One GKE node pool per group (plan pool, capacity type, zone, machine type) in the plan's zone.
# Pools scale from zero up to the plan's nodes while the job's pods wait and back to zero when the job ends.

# pool rollout (rollout, eval, weight_sync): 1 x a3-edgegpu-8g-nolssd spot in northamerica-northeast2-c
resource "google_container_node_pool" "r_grpo_7b_math_cbccb2_rollout_spot" {
  name     = "grpo-7b-math-cbccb2-rollout-spot"
  cluster  = var.cluster
  location = "northamerica-northeast2"
  node_locations = ["northamerica-northeast2-c"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 1
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "a3-edgegpu-8g-nolssd"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "grpo-7b-math-cbccb2-rollout-spot", "ptplan.io/pool" = "rollout" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "rl", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-plan" = "grpo-7b-math-cbccb2", "ptplan-pool" = "rollout", "ptplan-project" = "grpo-7b-math" }
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

# pool scoring (scoring): 1 x a3-edgegpu-8g-nolssd spot in northamerica-northeast2-c
resource "google_container_node_pool" "r_grpo_7b_math_cbccb2_scoring_spot" {
  name     = "grpo-7b-math-cbccb2-scoring-spot"
  cluster  = var.cluster
  location = "northamerica-northeast2"
  node_locations = ["northamerica-northeast2-c"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 1
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "a3-edgegpu-8g-nolssd"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "grpo-7b-math-cbccb2-scoring-spot", "ptplan.io/pool" = "scoring" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "rl", "ptplan-phase" = "scoring", "ptplan-plan" = "grpo-7b-math-cbccb2", "ptplan-pool" = "scoring", "ptplan-project" = "grpo-7b-math" }
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

# pool update (update, checkpoint): 4 x a3-edgegpu-8g-nolssd on-demand in northamerica-northeast2-c
resource "google_container_node_pool" "r_grpo_7b_math_cbccb2_update_on_demand" {
  name     = "grpo-7b-math-cbccb2-update-on-demand"
  cluster  = var.cluster
  location = "northamerica-northeast2"
  node_locations = ["northamerica-northeast2-c"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 4
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "a3-edgegpu-8g-nolssd"
    spot            = false
    labels          = { "ptplan.io/capacity-type" = "on-demand", "ptplan.io/group" = "grpo-7b-math-cbccb2-update-on-demand", "ptplan.io/pool" = "update" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "rl", "ptplan-phase" = "update-checkpoint", "ptplan-plan" = "grpo-7b-math-cbccb2", "ptplan-pool" = "update", "ptplan-project" = "grpo-7b-math" }
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

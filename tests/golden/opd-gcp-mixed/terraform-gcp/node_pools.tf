# One GKE node pool per plan pool, capacity type and machine type; fixed size = the plan's nodes.

# pool rollout (rollout, eval, weight_sync): 4 x a3-highgpu-1g on-demand
resource "google_container_node_pool" "r_rollout_on_demand" {
  name     = "rollout-on-demand"
  cluster  = var.cluster
  location = "us-central1"

  autoscaling {
    total_min_node_count = 4
    total_max_node_count = 4
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "a3-highgpu-1g"
    spot            = false
    labels          = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
    disk_size_gb    = 500

    guest_accelerator {
      type  = "nvidia-h100-80gb"
      count = 1
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }
  }
}

# pool rollout (rollout, eval, weight_sync): 3 x a3-highgpu-1g spot
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
    machine_type    = "a3-highgpu-1g"
    spot            = true
    labels          = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
    disk_size_gb    = 500

    guest_accelerator {
      type  = "nvidia-h100-80gb"
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

# pool scoring (scoring): 20 x g2-standard-4 on-demand
resource "google_container_node_pool" "r_scoring_on_demand" {
  name     = "scoring-on-demand"
  cluster  = var.cluster
  location = "us-central1"

  autoscaling {
    total_min_node_count = 20
    total_max_node_count = 20
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "g2-standard-4"
    spot            = false
    labels          = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
    disk_size_gb    = 500

    guest_accelerator {
      type  = "nvidia-l4"
      count = 1
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }
  }
}

# pool scoring (scoring): 20 x g2-standard-4 spot
resource "google_container_node_pool" "r_scoring_spot" {
  name     = "scoring-spot"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a", "us-central1-b", "us-central1-c"]

  autoscaling {
    total_min_node_count = 20
    total_max_node_count = 20
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "g2-standard-4"
    spot            = true
    labels          = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
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

# pool update (update, checkpoint): 2 x a3-edgegpu-8g-nolssd on-demand
resource "google_container_node_pool" "r_update_on_demand" {
  name     = "update-on-demand"
  cluster  = var.cluster
  location = "us-central1"

  autoscaling {
    total_min_node_count = 2
    total_max_node_count = 2
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "a3-edgegpu-8g-nolssd"
    spot            = false
    labels          = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "update-checkpoint", "ptplan-pool" = "update", "ptplan-project" = "opd-8b-from-32b" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "update-checkpoint", "ptplan-pool" = "update", "ptplan-project" = "opd-8b-from-32b" }
    disk_size_gb    = 500

    guest_accelerator {
      type  = "nvidia-h100-80gb"
      count = 8
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }
  }
}

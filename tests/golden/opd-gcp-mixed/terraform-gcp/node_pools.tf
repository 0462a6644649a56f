# One GKE node pool per group (plan pool, capacity type, zone, machine type) in the plan's zone.
# Pools scale from zero up to the plan's nodes while the job's pods wait and back to zero when the job ends.

# pool rollout (rollout, eval, weight_sync): 2 x a2-ultragpu-4g on-demand in us-central1-a
resource "google_container_node_pool" "r_opd_8b_from_32b_7c25ba_rollout_on_demand" {
  name     = "opd-8b-from-32b-7c25ba-rollout-on-demand"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 2
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "a2-ultragpu-4g"
    spot            = false
    labels          = { "ptplan.io/capacity-type" = "on-demand", "ptplan.io/group" = "opd-8b-from-32b-7c25ba-rollout-on-demand", "ptplan.io/pool" = "rollout" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-plan" = "opd-8b-from-32b-7c25ba", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
    disk_size_gb    = 200
    disk_type       = "pd-balanced"

    guest_accelerator {
      type  = "nvidia-a100-80gb"
      count = 4
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    gvnic {
      enabled = true
    }
  }
}

# pool rollout (rollout, eval, weight_sync): 1 x a2-ultragpu-4g spot in us-central1-a
resource "google_container_node_pool" "r_opd_8b_from_32b_7c25ba_rollout_spot" {
  name     = "opd-8b-from-32b-7c25ba-rollout-spot"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 1
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "a2-ultragpu-4g"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "opd-8b-from-32b-7c25ba-rollout-spot", "ptplan.io/pool" = "rollout" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-plan" = "opd-8b-from-32b-7c25ba", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
    disk_size_gb    = 200
    disk_type       = "pd-balanced"

    guest_accelerator {
      type  = "nvidia-a100-80gb"
      count = 4
      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    gvnic {
      enabled = true
    }
  }
}

# pool scoring (scoring): 14 x g2-standard-4 on-demand in us-central1-a
resource "google_container_node_pool" "r_opd_8b_from_32b_7c25ba_scoring_on_demand" {
  name     = "opd-8b-from-32b-7c25ba-scoring-on-demand"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 14
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "g2-standard-4"
    spot            = false
    labels          = { "ptplan.io/capacity-type" = "on-demand", "ptplan.io/group" = "opd-8b-from-32b-7c25ba-scoring-on-demand", "ptplan.io/pool" = "scoring" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-plan" = "opd-8b-from-32b-7c25ba", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
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

# pool scoring (scoring): 8 x g2-standard-4 spot in us-central1-a
resource "google_container_node_pool" "r_opd_8b_7c25ba_scoring_spot_g2_standard_4" {
  name     = "opd-8b-7c25ba-scoring-spot-g2-standard-4"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 8
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "g2-standard-4"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "opd-8b-7c25ba-scoring-spot-g2-standard-4", "ptplan.io/pool" = "scoring" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-plan" = "opd-8b-from-32b-7c25ba", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
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

# pool scoring (scoring): 6 x g2-standard-8 spot in us-central1-a
resource "google_container_node_pool" "r_opd_8b_7c25ba_scoring_spot_g2_standard_8" {
  name     = "opd-8b-7c25ba-scoring-spot-g2-standard-8"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 6
    location_policy      = "ANY"
  }

  node_config {
    machine_type    = "g2-standard-8"
    spot            = true
    labels          = { "ptplan.io/capacity-type" = "spot", "ptplan.io/group" = "opd-8b-7c25ba-scoring-spot-g2-standard-8", "ptplan.io/pool" = "scoring" }
    resource_labels = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-plan" = "opd-8b-from-32b-7c25ba", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
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

# pool update (update, checkpoint): 1 x a3-edgegpu-8g-nolssd on-demand in us-central1-a
resource "google_container_node_pool" "r_opd_8b_from_32b_7c25ba_update_on_demand" {
  name     = "opd-8b-from-32b-7c25ba-update-on-demand"
  cluster  = var.cluster
  location = "us-central1"
  node_locations = ["us-central1-a"]

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = 1
    location_policy      = "BALANCED"
  }

  node_config {
    machine_type    = "a3-edgegpu-8g-nolssd"
    spot            = false
    labels          = { "ptplan.io/capacity-type" = "on-demand", "ptplan.io/group" = "opd-8b-from-32b-7c25ba-update-on-demand", "ptplan.io/pool" = "update" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "update-checkpoint", "ptplan-plan" = "opd-8b-from-32b-7c25ba", "ptplan-pool" = "update", "ptplan-project" = "opd-8b-from-32b" }
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

# One GKE node pool per group (plan pool, capacity type, zone, machine type) in the plan's zone.
# Pools scale from zero up to the plan's nodes while the job's pods wait and back to zero when the job ends.

# pool all (update, eval, checkpoint): 1 x a3-edgegpu-8g-nolssd on-demand in us-central1-a
resource "google_container_node_pool" "r_sft_8b_chat_1838ad_all_on_demand" {
  name     = "sft-8b-chat-1838ad-all-on-demand"
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
    labels          = { "ptplan.io/capacity-type" = "on-demand", "ptplan.io/group" = "sft-8b-chat-1838ad-all-on-demand", "ptplan.io/pool" = "all" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "sft", "ptplan-phase" = "update-eval-checkpoint", "ptplan-plan" = "sft-8b-chat-1838ad", "ptplan-pool" = "all", "ptplan-project" = "sft-8b-chat" }
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

# One GKE node pool per plan pool, capacity type and machine type; fixed size = the plan's nodes.

# pool all (update, eval, checkpoint): 1 x a3-highgpu-2g on-demand
resource "google_container_node_pool" "r_all_on_demand" {
  name     = "all-on-demand"
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
    labels          = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "sft", "ptplan-phase" = "update-eval-checkpoint", "ptplan-pool" = "all", "ptplan-project" = "sft-8b-chat" }
    resource_labels = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "sft", "ptplan-phase" = "update-eval-checkpoint", "ptplan-pool" = "all", "ptplan-project" = "sft-8b-chat" }
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

# One Auto Scaling group per plan pool and capacity type (mixed_instances_policy), sized to the plan's nodes.

# pool rollout (rollout, eval, weight_sync): 1 x p6-b200.48xlarge spot
data "aws_subnets" "r_rollout_spot" {
  filter {
    name   = "vpc-id"
    values = [var.vpc_id]
  }
  filter {
    name   = "availability-zone-id"
    values = ["use1-atl2-az1"]
  }
}

resource "aws_launch_template" "r_rollout_spot" {
  name_prefix = "opd-8b-from-32b-rollout-spot-"
  image_id    = var.image_id
  tag_specifications {
    resource_type = "instance"
    tags          = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
  }
  tag_specifications {
    resource_type = "volume"
    tags          = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
  }
  tags = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "rollout-eval-weight_sync", "ptplan-pool" = "rollout", "ptplan-project" = "opd-8b-from-32b" }
}

resource "aws_autoscaling_group" "r_rollout_spot" {
  name                = "opd-8b-from-32b-rollout-spot"
  min_size            = 1
  max_size            = 1
  desired_capacity    = 1
  vpc_zone_identifier = data.aws_subnets.r_rollout_spot.ids
  capacity_rebalance  = true

  mixed_instances_policy {
    instances_distribution {
      on_demand_base_capacity                  = 0
      on_demand_percentage_above_base_capacity = 0
      spot_allocation_strategy                 = "price-capacity-optimized"
    }
    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.r_rollout_spot.id
        version            = "$Latest"
      }
      override {
        instance_type = "p6-b200.48xlarge"
      }
    }
  }

  tag {
    key                 = "ptplan-capacity-type"
    value               = "spot"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-method"
    value               = "opd"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-phase"
    value               = "rollout-eval-weight_sync"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-pool"
    value               = "rollout"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-project"
    value               = "opd-8b-from-32b"
    propagate_at_launch = true
  }
}

# pool scoring (scoring): 1 x p6-b200.48xlarge spot
data "aws_subnets" "r_scoring_spot" {
  filter {
    name   = "vpc-id"
    values = [var.vpc_id]
  }
  filter {
    name   = "availability-zone-id"
    values = ["use1-atl2-az1"]
  }
}

resource "aws_launch_template" "r_scoring_spot" {
  name_prefix = "opd-8b-from-32b-scoring-spot-"
  image_id    = var.image_id
  tag_specifications {
    resource_type = "instance"
    tags          = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
  }
  tag_specifications {
    resource_type = "volume"
    tags          = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
  }
  tags = { "ptplan-capacity-type" = "spot", "ptplan-method" = "opd", "ptplan-phase" = "scoring", "ptplan-pool" = "scoring", "ptplan-project" = "opd-8b-from-32b" }
}

resource "aws_autoscaling_group" "r_scoring_spot" {
  name                = "opd-8b-from-32b-scoring-spot"
  min_size            = 1
  max_size            = 1
  desired_capacity    = 1
  vpc_zone_identifier = data.aws_subnets.r_scoring_spot.ids
  capacity_rebalance  = true

  mixed_instances_policy {
    instances_distribution {
      on_demand_base_capacity                  = 0
      on_demand_percentage_above_base_capacity = 0
      spot_allocation_strategy                 = "price-capacity-optimized"
    }
    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.r_scoring_spot.id
        version            = "$Latest"
      }
      override {
        instance_type = "p6-b200.48xlarge"
      }
    }
  }

  tag {
    key                 = "ptplan-capacity-type"
    value               = "spot"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-method"
    value               = "opd"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-phase"
    value               = "scoring"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-pool"
    value               = "scoring"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-project"
    value               = "opd-8b-from-32b"
    propagate_at_launch = true
  }
}

# pool update (update, checkpoint): 2 x p6-b200.48xlarge on-demand
data "aws_subnets" "r_update_on_demand" {
  filter {
    name   = "vpc-id"
    values = [var.vpc_id]
  }
}

resource "aws_launch_template" "r_update_on_demand" {
  name_prefix = "opd-8b-from-32b-update-on-demand-"
  image_id    = var.image_id
  tag_specifications {
    resource_type = "instance"
    tags          = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "update-checkpoint", "ptplan-pool" = "update", "ptplan-project" = "opd-8b-from-32b" }
  }
  tag_specifications {
    resource_type = "volume"
    tags          = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "update-checkpoint", "ptplan-pool" = "update", "ptplan-project" = "opd-8b-from-32b" }
  }
  tags = { "ptplan-capacity-type" = "on-demand", "ptplan-method" = "opd", "ptplan-phase" = "update-checkpoint", "ptplan-pool" = "update", "ptplan-project" = "opd-8b-from-32b" }
}

resource "aws_autoscaling_group" "r_update_on_demand" {
  name                = "opd-8b-from-32b-update-on-demand"
  min_size            = 2
  max_size            = 2
  desired_capacity    = 2
  vpc_zone_identifier = data.aws_subnets.r_update_on_demand.ids
  capacity_rebalance  = false

  mixed_instances_policy {
    instances_distribution {
      on_demand_base_capacity                  = 2
      on_demand_percentage_above_base_capacity = 100
      spot_allocation_strategy                 = "price-capacity-optimized"
    }
    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.r_update_on_demand.id
        version            = "$Latest"
      }
      override {
        instance_type = "p6-b200.48xlarge"
      }
    }
  }

  tag {
    key                 = "ptplan-capacity-type"
    value               = "on-demand"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-method"
    value               = "opd"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-phase"
    value               = "update-checkpoint"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-pool"
    value               = "update"
    propagate_at_launch = true
  }
  tag {
    key                 = "ptplan-project"
    value               = "opd-8b-from-32b"
    propagate_at_launch = true
  }
}

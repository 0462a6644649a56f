# Cost allocation tags: AWS bills split by a tag only once the tag key is activated (Billing and Cost Management, cost allocation tags;
# resource aws_ce_cost_allocation_tag). Every node (EC2NodeClass tags), volume and the bucket carry these keys.

resource "aws_ce_cost_allocation_tag" "tag_1" {
  count   = var.activate_cost_tags ? 1 : 0
  tag_key = "ptplan-capacity-type"
  status  = "Active"
}

resource "aws_ce_cost_allocation_tag" "tag_2" {
  count   = var.activate_cost_tags ? 1 : 0
  tag_key = "ptplan-method"
  status  = "Active"
}

resource "aws_ce_cost_allocation_tag" "tag_3" {
  count   = var.activate_cost_tags ? 1 : 0
  tag_key = "ptplan-phase"
  status  = "Active"
}

resource "aws_ce_cost_allocation_tag" "tag_4" {
  count   = var.activate_cost_tags ? 1 : 0
  tag_key = "ptplan-plan"
  status  = "Active"
}

resource "aws_ce_cost_allocation_tag" "tag_5" {
  count   = var.activate_cost_tags ? 1 : 0
  tag_key = "ptplan-pool"
  status  = "Active"
}

resource "aws_ce_cost_allocation_tag" "tag_6" {
  count   = var.activate_cost_tags ? 1 : 0
  tag_key = "ptplan-project"
  status  = "Active"
}

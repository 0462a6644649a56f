# The plan's zones (zone IDs) must each hold a subnet that Karpenter discovers (karpenter.sh/discovery = var.cluster): a pool
# pinned to a zone without one never launches. Local Zones need the account opt-in and a subnet of their own.

data "aws_subnets" "zone_1" {
  filter {
    name   = "tag:karpenter.sh/discovery"
    values = [var.cluster]
  }
  filter {
    name   = "availability-zone-id"
    values = ["use2-az3"]
  }
}

check "subnet_zone_1" {
  assert {
    condition     = length(data.aws_subnets.zone_1.ids) > 0
    error_message = "no subnet tagged karpenter.sh/discovery in zone use2-az3: the plan's pools there cannot launch"
  }
}

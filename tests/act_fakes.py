"""Fakes of what ``guard --act`` calls, on :class:`local_server.LocalServer`: the Kubernetes
API (GET and merge-patch of custom objects: a RayJob, Karpenter NodePools; bearer token
checked), Auto Scaling (AWS query protocol, XML, API version 2011-01-01:
DescribeAutoScalingGroups with tag filters, each group's Tags and NextToken,
UpdateAutoScalingGroup) and GKE (container v1 REST: GET ``nodePools/*`` with its
``config.resourceLabels`` and ``autoscaling``, ``:setAutoscaling``, ``:setSize``,
``operations/*``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from local_server import Answer, LocalServer

TOKEN = "fake-kube-token-ZZZ"
ASG_NS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"


class FakeKube:
    """Objects by path; PATCH merges the body (RFC 7386) and answers the object; 404 for an
    object that is not there, 401 without the token."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.local = LocalServer(self.answer)
        self.url = self.local.url

    def close(self) -> None:
        self.local.close()

    def kubeconfig(self, path: Path) -> str:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "guard", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "guard"}}]}))
        return str(path)

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        if headers.get("authorization") != f"Bearer {TOKEN}":
            return 401, {}, {"kind": "Status", "status": "Failure", "code": 401,
                             "reason": "Unauthorized", "message": "Unauthorized"}
        obj = self.objects.get(path.split("?")[0])
        if obj is None:
            return 404, {}, {"kind": "Status", "status": "Failure", "code": 404,
                             "reason": "NotFound", "message": f"{path} not found"}
        if method == "PATCH":
            patch = json.loads(body)
            self.patches.append((path, headers.get("content-type", ""), patch))
            _merge(obj, patch)
        return 200, {}, obj


def _merge(obj: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(obj.get(k), dict):
            _merge(obj[k], v)
        elif v is None:
            obj.pop(k, None)
        else:
            obj[k] = v


class FakeAutoScaling:
    """Groups: name → (tags, min, max, desired); pages of one group. ``filter_tags=False``
    answers every group whatever the filters (a listing wider than asked for); ``fail_update``:
    the groups whose update answers AccessDenied."""

    def __init__(self, groups: dict[str, dict[str, Any]], filter_tags: bool = True,
                 fail_update: tuple[str, ...] = ()) -> None:
        self.groups = groups
        self.filter_tags = filter_tags
        self.fail_update = fail_update
        self.actions: list[dict[str, str]] = []
        self.local = LocalServer(self.answer)
        self.url = self.local.url

    def close(self) -> None:
        self.local.close()

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.actions.append(form)
        xml = {"Content-Type": "text/xml"}
        if form.get("Action") == "DescribeAutoScalingGroups":
            filters: dict[str, str] = {}
            i = 1
            while f"Filters.member.{i}.Name" in form:
                filters[form[f"Filters.member.{i}.Name"].removeprefix("tag:")] = \
                    form[f"Filters.member.{i}.Values.member.1"]
                i += 1
            names = sorted(n for n, g in self.groups.items() if not self.filter_tags
                           or all(g["tags"].get(k) == v for k, v in filters.items()))
            start = int(form.get("NextToken") or 0)
            page = names[start:start + 1]
            members = "".join(
                f"<member><AutoScalingGroupName>{n}</AutoScalingGroupName>"
                f"<MinSize>{self.groups[n]['min']}</MinSize><MaxSize>{self.groups[n]['max']}"
                f"</MaxSize><DesiredCapacity>{self.groups[n]['desired']}</DesiredCapacity>"
                "<Tags>" + "".join(
                    f"<member><ResourceId>{n}</ResourceId><ResourceType>auto-scaling-group"
                    f"</ResourceType><Key>{k}</Key><Value>{v}</Value><PropagateAtLaunch>true"
                    "</PropagateAtLaunch></member>" for k, v in self.groups[n]["tags"].items())
                + "</Tags></member>" for n in page)
            token = f"<NextToken>{start + 1}</NextToken>" if start + 1 < len(names) else ""
            return 200, xml, (f'<DescribeAutoScalingGroupsResponse xmlns="{ASG_NS}">'
                              f"<DescribeAutoScalingGroupsResult><AutoScalingGroups>{members}"
                              f"</AutoScalingGroups>{token}</DescribeAutoScalingGroupsResult>"
                              "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"
                              "</DescribeAutoScalingGroupsResponse>")
        if form.get("Action") == "UpdateAutoScalingGroup":
            if form["AutoScalingGroupName"] in self.fail_update:
                return 403, xml, ("<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied"
                                  "</Code><Message>User: arn:aws:sts::1:assumed-role/guard is not"
                                  " authorized to perform: autoscaling:UpdateAutoScalingGroup"
                                  "</Message></Error><RequestId>r</RequestId></ErrorResponse>")
            g = self.groups[form["AutoScalingGroupName"]]
            g.update(min=int(form["MinSize"]), max=int(form["MaxSize"]),
                     desired=int(form["DesiredCapacity"]))
            return 200, xml, (f'<UpdateAutoScalingGroupResponse xmlns="{ASG_NS}">'
                              "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"
                              "</UpdateAutoScalingGroupResponse>")
        return 400, xml, ("<ErrorResponse><Error><Type>Sender</Type><Code>InvalidAction</Code>"
                          "<Message>no</Message></Error></ErrorResponse>")


class FakeGKE:
    """Node pools by full name → {"autoscaling": bool, "size": int, "labels": {resource
    labels}}; operations come back RUNNING once, then DONE on the first operations.get."""

    def __init__(self, pools: dict[str, dict[str, Any]]) -> None:
        self.pools = pools
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.local = LocalServer(self.answer)
        self.url = self.local.url

    def close(self) -> None:
        self.local.close()

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        url = path.split("?")[0].removeprefix("/v1/")
        data = json.loads(body) if body else {}
        self.requests.append((method, url, data))
        if method == "GET" and "/operations/" in url:
            return 200, {}, {"name": url.rsplit("/", 1)[1], "status": "DONE"}
        name, _, verb = url.partition(":")
        pool = self.pools.get(name)
        if pool is None:
            return 404, {}, {"error": {"code": 404, "message": f"{name} not found",
                                       "status": "NOT_FOUND"}}
        if method == "GET" and not verb:
            auto = {"enabled": True, "totalMinNodeCount": 0, "totalMaxNodeCount": 4,
                    "locationPolicy": "ANY"} if pool["autoscaling"] else {}
            return 200, {}, {"name": name.rsplit("/", 1)[1], "autoscaling": auto,
                             "config": {"resourceLabels": pool.get("labels", {})}}
        if verb == "setAutoscaling":
            pool["autoscaling"] = bool(data.get("autoscaling", {}).get("enabled", False))
        elif verb == "setSize":
            pool["size"] = int(data.get("nodeCount", 0))
        else:
            return 400, {}, {"error": {"code": 400, "message": verb,
                                       "status": "INVALID_ARGUMENT"}}
        return 200, {}, {"name": f"operation-{len(self.requests)}", "status": "RUNNING",
                         "operationType": "SET_NODE_POOL_SIZE"}

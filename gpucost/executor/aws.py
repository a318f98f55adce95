"""The `aws` provider: EC2 instances through boto3, on-demand or spot.

Every instance carries tags that identify the run (``gpucost:run``, ``gpucost:token``), so
:meth:`AwsProvider.find` recovers instances whose ids never reached the ledger. The instance
runs a user-data bootstrap that checks the GPU with a real CUDA matmul, runs the job through
torchrun under a hard ``timeout`` and then shuts the machine down; with
``InstanceInitiatedShutdownBehavior`` = terminate (or stop, for the stop idle policy) the
machine ends itself even if the launcher is gone. Spot uses ``InstanceMarketOptions``
(one-time, terminate on interruption). Multi-node runs rendezvous (c10d) at the first node, whose
private address the launcher publishes as the ``gpucost:rdzv`` tag, read by the bootstrap from
the instance metadata service.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gpucost.errors import CapacityError, CredentialsError, ProviderError
from gpucost.executor.base import (
    JobSpec,
    Provider,
    ProvisionRequest,
    Resource,
    ResourceState,
)
from gpucost.executor.torchrun import RDZV_PORT, remote_script

if TYPE_CHECKING:
    from gpucost.plan import Plan

# The AWS Deep Learning Base AMI (NVIDIA driver, CUDA, Python) published through SSM.
DEFAULT_AMI_PARAMETER = ("/aws/service/deeplearning/ami/x86_64/"
                         "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id")
RUN_TAG, TOKEN_TAG, RDZV_TAG = "gpucost:run", "gpucost:token", "gpucost:rdzv"
_CAPACITY_CODES = {"InsufficientInstanceCapacity", "InsufficientCapacity",
                   "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded",
                   "InstanceLimitExceeded", "VcpuLimitExceeded", "Unsupported"}
_CREDENTIAL_CODES = {"AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId",
                     "SignatureDoesNotMatch", "ExpiredToken", "OptInRequired"}
_STATES: dict[str, ResourceState] = {
    "pending": "pending", "running": "running", "stopping": "stopped", "stopped": "stopped",
    "shutting-down": "exited", "terminated": "exited",
}


class AwsProvider(Provider):
    name = "aws"
    unsupported: ClassVar[Mapping[str, str]] = {
        "logs": "the job's log stays on the instance (/var/log/gpucost-train.log); progress "
                "reaches this machine through the checkpoint target",
        "workdir-sync": "the job's code is not uploaded: bake it into the image or have the "
                        "command fetch it",
        "stop-spot": "a one-time spot instance cannot be stopped, only terminated",
    }

    def __init__(self, region: str = "", endpoint_url: str | None = None,
                 image_id: str | None = None, connect_timeout_s: float = 10.0,
                 read_timeout_s: float = 60.0, max_attempts: int = 4,
                 poll_s: float = 5.0) -> None:
        self.region = region or "us-east-1"
        self.endpoint_url = endpoint_url
        self.image_id = image_id
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_attempts = max_attempts
        self.poll_s = poll_s
        self._client: Any = None

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"region": self.region}
        if self.endpoint_url:
            out["endpoint_url"] = self.endpoint_url
        if self.image_id:
            out["image_id"] = self.image_id
        return out

    def _ec2(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "ec2", region_name=self.region, endpoint_url=self.endpoint_url,
                config=Config(connect_timeout=self.connect_timeout_s,
                              read_timeout=self.read_timeout_s,
                              retries={"total_max_attempts": self.max_attempts,
                                       "mode": "standard"}))
        return self._client

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        """Call boto3, turning its exceptions into gpucost's provider errors."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            return fn(**kwargs)
        except NoCredentialsError as err:
            raise CredentialsError(f"aws {what}: no AWS credentials found",
                                   hint="set AWS_PROFILE or AWS_ACCESS_KEY_ID/SECRET") from err
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            message = f"aws {what} failed: {code}: {err.response.get('Error', {}).get('Message')}"
            if code in _CAPACITY_CODES:
                raise CapacityError(message, hint="try another zone, region, instance type or "
                                    "market") from err
            if code in _CREDENTIAL_CODES:
                raise CredentialsError(message, hint="check the credentials' EC2 permissions"
                                       ) from err
            raise ProviderError(message) from err
        except BotoCoreError as err:  # connection refused, timeouts, bad endpoints
            raise ProviderError(f"aws {what}: {err}", hint="check the network and retry; "
                                "`gpucost cleanup` releases anything left behind") from err

    def _image(self) -> str:
        if self.image_id:
            return self.image_id
        import boto3

        ssm = boto3.client("ssm", region_name=self.region, endpoint_url=self.endpoint_url)
        answer = self._call("resolve AMI", ssm.get_parameter, Name=DEFAULT_AMI_PARAMETER)
        self.image_id = str(answer["Parameter"]["Value"])
        return self.image_id

    # -- bootstrap -----------------------------------------------------------------------------
    def bootstrap_script(self, plan: Plan, run_id: str) -> str:
        """User data: verify the GPU, run the job under a hard timeout, shut the machine down
        (which terminates it, or stops it under the stop idle policy)."""
        rendezvous = []
        if plan.offer.nodes > 1:
            rendezvous = [
                'IMDS=$(curl -sX PUT http://169.254.169.254/latest/api/token '
                '-H "X-aws-ec2-metadata-token-ttl-seconds: 21600")',
                f'until GPUCOST_RDZV=$(curl -sf -H "X-aws-ec2-metadata-token: $IMDS" '
                f'http://169.254.169.254/latest/meta-data/tags/instance/{RDZV_TAG}); '
                "do sleep 5; done",
            ]
        return remote_script(plan, run_id, on_exit="shutdown -h now", rendezvous=rendezvous)

    # -- lifecycle -------------------------------------------------------------------------------
    def provision(self, request: ProvisionRequest) -> list[Resource]:
        ec2 = self._ec2()
        tags = [{"Key": RUN_TAG, "Value": request.run_id},
                {"Key": TOKEN_TAG, "Value": request.token},
                {"Key": "Name", "Value": f"gpucost {request.run_id}"}]
        params: dict[str, Any] = {
            "ImageId": self._image(), "InstanceType": request.instance_type,
            "MinCount": request.nodes, "MaxCount": request.nodes,
            # EC2 makes a retried request with the same token return the same instances.
            "ClientToken": request.token[:64],
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tags},
                                  {"ResourceType": "volume", "Tags": tags}],
            "MetadataOptions": {"HttpTokens": "required", "InstanceMetadataTags": "enabled"},
            "InstanceInitiatedShutdownBehavior": request.shutdown_behavior,
        }
        if request.user_data:
            params["UserData"] = request.user_data
        if request.disk_gb > 0:
            params["BlockDeviceMappings"] = [{"DeviceName": "/dev/sda1", "Ebs": {
                "VolumeSize": math.ceil(request.disk_gb), "VolumeType": "gp3",
                "DeleteOnTermination": True}}]
        if request.zone:
            params["Placement"] = {"AvailabilityZone": request.zone}
        if request.market == "spot":
            params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": {
                "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
        answer = self._call("run_instances", ec2.run_instances, **params)
        resources = [self._resource(i, request.token, price_hr=request.price_hr)
                     for i in answer["Instances"]]
        if request.nodes > 1:
            first_ip = answer["Instances"][0].get("PrivateIpAddress", "")
            self._call("create_tags", ec2.create_tags,
                       Resources=[r.resource_id for r in resources],
                       Tags=[{"Key": RDZV_TAG, "Value": f"{first_ip}:{RDZV_PORT}"}])
        return resources

    def _resource(self, instance: Mapping[str, Any], token: str, kind: str = "instance",
                  price_hr: float = 0.0) -> Resource:
        return Resource(provider=self.name, resource_id=instance["InstanceId"], token=token,
                        region=self.region, kind=kind, price_hr=price_hr,
                        meta={"instance_type": instance.get("InstanceType", ""),
                              "lifecycle": instance.get("InstanceLifecycle", "on-demand"),
                              "private_ip": instance.get("PrivateIpAddress", "")})

    def _describe(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        answer = self._call("describe_instances", self._ec2().describe_instances,
                            InstanceIds=list(ids))
        return [i for r in answer["Reservations"] for i in r["Instances"]]

    def wait(self, resources: Sequence[Resource], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        ids = [r.resource_id for r in resources]
        while True:
            states = {i["InstanceId"]: i["State"]["Name"] for i in self._describe(ids)}
            gone = [i for i, s in states.items() if s in ("shutting-down", "terminated")]
            if gone:
                raise CapacityError(f"aws instance(s) {', '.join(gone)} ended before running",
                                    hint="spot capacity may have been reclaimed; retry or use "
                                         "on-demand")
            if all(s == "running" for s in states.values()):
                return
            if time.monotonic() >= deadline:
                raise ProviderError(f"aws instances not running after {timeout_s:g} s: {states}")
            time.sleep(self.poll_s)

    def run(self, resources: Sequence[Resource], job: JobSpec) -> Resource:
        # The user-data bootstrap started the job at boot; the first node stands for it.
        first = resources[0]
        return Resource(provider=self.name, resource_id=first.resource_id, token=first.token,
                        region=self.region, kind="job", meta=first.meta)

    def status(self, resource: Resource) -> ResourceState:
        found = self._describe([resource.resource_id])
        return _STATES.get(found[0]["State"]["Name"], "unknown") if found else "exited"

    def exit_code(self, resource: Resource) -> int | None:
        """0 when the bootstrap shut the machine down after the job, 1 when something else ended
        it (a spot reclaim, a user); the job's own exit status is in its log on the machine."""
        found = self._describe([resource.resource_id])
        if not found or found[0]["State"]["Name"] in ("pending", "running"):
            return None
        reason = found[0].get("StateReason", {}).get("Code", "")
        return 0 if reason == "Client.InstanceInitiatedShutdown" else 1

    def stop(self, resource: Resource) -> None:
        if resource.meta.get("lifecycle") == "spot":
            self.destroy(resource)
            return
        self._call("stop_instances", self._ec2().stop_instances,
                   InstanceIds=[resource.resource_id])

    def destroy(self, resource: Resource) -> None:
        from botocore.exceptions import ClientError

        try:
            self._call("terminate_instances", self._ec2().terminate_instances,
                       InstanceIds=[resource.resource_id])
        except ProviderError as err:
            cause = err.__cause__
            if (isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code")
                    == "InvalidInstanceID.NotFound"):
                return  # already gone: destroying is idempotent
            raise

    def find(self, token: str) -> list[Resource]:
        answer = self._call("describe_instances", self._ec2().describe_instances, Filters=[
            {"Name": f"tag:{TOKEN_TAG}", "Values": [token]},
            {"Name": "instance-state-name",
             "Values": ["pending", "running", "stopping", "stopped"]}])
        return [self._resource(i, token) for r in answer["Reservations"] for i in r["Instances"]]

"""The `vast` provider: Vast.ai instances through its REST API (httpx).

A plan made for Vast records a search (``[marketplace]``: GPU, count, country, max $/h,
reliability, bandwidth, disk), because an ask found while planning is rarely still there at
launch. :meth:`VastProvider.provision` runs it (``POST /api/v0/bundles/``), keeps the offers whose
GPU the catalog reads as the planned one, and rents the cheapest that is still free
(``PUT /api/v0/asks/{id}/``; an ask someone else took first answers 404 ``no_such_ask`` and the
next one is tried). A hand-written plan without ``[marketplace]`` names the ask id in
``instance_type``. Stop is ``PUT /api/v0/instances/{id}/ {"state": "stopped"}``, destroy is
``DELETE``. Reads and deletes are retried with exponential backoff on 429 (Vast sends no
Retry-After), 5xx and network timeouts. A create is not idempotent: it is retried only after a
429 (refused unread) or after the instance list shows that nothing carries the run's token.
Every instance carries that token as its ``label``, which is how :meth:`VastProvider.find`
recovers instances whose ids never reached the ledger. The container's
``onstart`` script verifies the GPU, runs the job under a hard timeout and then stops its own
instance with the per-container key Vast injects (``CONTAINER_ID``, ``CONTAINER_API_KEY``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucost.errors import CapacityError, CredentialsError, InputError, ProviderError
from gpucost.executor.base import JobSpec, Provider, ProvisionRequest, Resource, ResourceState
from gpucost.executor.torchrun import remote_script

if TYPE_CHECKING:
    import httpx

    from gpucost.http import RetryingHttp
    from gpucost.planfile import Plan

DEFAULT_URL = "https://console.vast.ai"
MIB_PER_GB = 1024.0  # Vast's gpu_ram is in MiB
SEARCH_LIMIT = 64
MAX_ASKS_TRIED = 5  # asks taken by others since the search before giving up
DEFAULT_IMAGE = "pytorch/pytorch:latest"
_STATES: dict[str, ResourceState] = {
    "created": "pending", "loading": "pending", "scheduling": "pending", "running": "running",
    "stopped": "stopped", "exited": "exited", "offline": "unknown",
}
_SELF_STOP = ('curl -s -X PUT "${GPUCOST_VAST_URL:-https://console.vast.ai}/api/v0/instances/'
              '$CONTAINER_ID/" -H "Authorization: Bearer $CONTAINER_API_KEY" '
              "-H 'Content-Type: application/json' -d '{\"state\": \"stopped\"}'")


def _api_key() -> str:
    key = os.environ.get("VAST_API_KEY", "")
    if not key:
        for path in (Path.home() / ".config" / "vastai" / "vast_api_key",
                     Path.home() / ".vast_api_key"):
            if path.is_file():
                key = path.read_text().strip()
                break
    if not key:
        raise CredentialsError("no Vast.ai API key found",
                               hint="set VAST_API_KEY or run `vastai set api-key KEY`")
    return key


class VastProvider(Provider):
    name = "vast"
    unsupported: ClassVar[Mapping[str, str]] = {
        "multi-node": "Vast rents single machines with no private network between them",
        "logs": "the job's log stays in the container (/var/log/gpucost-train.log); progress "
                "reaches this machine through the checkpoint target",
        "workdir-sync": "the job's code is not uploaded: use an image that has it or a command "
                        "that fetches it",
    }

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None,
                 image: str = DEFAULT_IMAGE, timeout_s: float = 30.0, max_attempts: int = 5,
                 backoff_s: float = 2.0, poll_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = api_key
        self.image = image
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.poll_s = poll_s
        self._client: RetryingHttp | None = None

    def config(self) -> dict[str, Any]:
        return {} if self.base_url == DEFAULT_URL else {"base_url": self.base_url}

    def _http(self) -> RetryingHttp:
        if self._client is None:
            import httpx

            from gpucost.http import RetryingHttp

            key = self._key or _api_key()
            raw = httpx.Client(base_url=self.base_url, timeout=self.timeout_s,
                               headers={"Authorization": f"Bearer {key}",
                                        "Accept": "application/json"})
            self._client = RetryingHttp(raw, source="vast", max_attempts=self.max_attempts,
                                        backoff_s=self.backoff_s, timeout_s=self.timeout_s,
                                        secrets=(key,))
        return self._client

    def _request(self, method: str, path: str, what: str,
                 json: Mapping[str, Any] | None = None) -> httpx.Response:
        """One API call, retried on 429, 5xx and network errors (the shared client's rules);
        other 4xx answers are returned, since their bodies say what happened."""
        try:
            answer, _ = self._http().send(method, path, json_body=json,
                                          return_client_errors=True)
        except CredentialsError as err:
            raise CredentialsError(f"vast {what}: {err.message}",
                                   hint="check VAST_API_KEY") from None
        except ProviderError as err:
            raise ProviderError(f"vast {what}: {err.message}",
                                hint="Vast is rate-limiting or unavailable; retry later, then "
                                     "`gpucost cleanup`") from None
        return answer

    @staticmethod
    def _body(answer: httpx.Response, what: str) -> dict[str, Any]:
        try:
            body = answer.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ProviderError(f"vast {what}: HTTP {answer.status_code}, not a JSON object")
        return body

    def bootstrap_script(self, plan: Plan, run_id: str) -> str:
        return remote_script(plan, run_id, on_exit=_SELF_STOP)

    def provision(self, request: ProvisionRequest) -> list[Resource]:
        if request.nodes != 1:
            raise InputError(f"vast cannot provide {request.nodes} connected nodes",
                             hint=self.unsupported["multi-node"])
        if request.search is not None:
            candidates = self.search(request)
        else:
            offer = request.offer_id or request.instance_type
            if not offer.isdigit():
                raise InputError(f"vast offer id {offer!r} is not a number",
                                 hint="plan with `gpucost plan --provider vast` (it records a "
                                      "[marketplace] search), or set [offer] instance_type to "
                                      "an ask id")
            candidates = [{"id": int(offer)}]
        taken = []
        for candidate in candidates[:MAX_ASKS_TRIED]:
            try:
                return [self._rent(request, candidate)]
            except CapacityError as err:
                taken.append(err.message)
        raise CapacityError("; ".join(taken) if taken else "no vast offer matches the plan's "
                            "search", hint="search again later, or relax [marketplace] (max "
                            "price, region, reliability) in the plan")

    def search(self, request: ProvisionRequest) -> list[dict[str, Any]]:
        """Free machines like the planned one, cheapest first (the plan's [marketplace])."""
        from gpucost.catalog import get_gpu, try_resolve_gpu_name

        wanted = request.search
        assert wanted is not None
        memory_mib = get_gpu(request.gpu).memory_gb * MIB_PER_GB
        query: dict[str, Any] = {
            "verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True},
            "rented": {"eq": False}, "num_gpus": {"eq": wanted.gpu_count},
            # the catalog's reading of the name decides; this only narrows the answer
            "gpu_ram": {"gte": 0.9 * memory_mib, "lte": 1.1 * memory_mib},
            "dph_base": {"lte": wanted.max_price_hr},
            "reliability": {"gte": wanted.min_reliability},
            "inet_down": {"gte": wanted.min_inet_down_mbps},
            "disk_space": {"gte": wanted.min_disk_gb},
            "order": [["dph_base", "asc"]], "limit": SEARCH_LIMIT,
            "type": "bid" if request.market == "spot" else "on-demand",
            "allocated_storage": max(wanted.min_disk_gb, request.disk_gb),
        }
        if wanted.region:
            query["geolocation"] = {"eq": wanted.region}
        answer = self._request("POST", "/api/v0/bundles/", "search offers", json=query)
        if answer.status_code >= 400:
            raise ProviderError(f"vast search offers: HTTP {answer.status_code}: "
                                f"{answer.text[:200]}")
        offers = self._body(answer, "search offers").get("offers")
        if not isinstance(offers, list):
            raise ProviderError("vast search offers: the answer has no offers list")
        found = []
        for offer in offers:
            if not isinstance(offer, dict) or not isinstance(offer.get("id"), int):
                continue
            gpu = try_resolve_gpu_name(str(offer.get("gpu_name", "")),
                                       memory_gb=float(offer.get("gpu_ram") or 0) / MIB_PER_GB
                                       or None)
            if gpu == request.gpu:
                found.append(offer)
        return sorted(found, key=lambda o: float(o.get("dph_base") or 0.0))

    def _rent(self, request: ProvisionRequest, offer: Mapping[str, Any]) -> Resource:
        ask = str(offer["id"])
        payload: dict[str, Any] = {
            "client_id": "me", "image": request.image or self.image, "label": request.token,
            "disk": max(10.0, request.disk_gb), "runtype": "ssh", "onstart": request.user_data,
            "env": {"GPUCOST_RUN_ID": request.run_id},
        }
        price = float(offer.get("dph_base") or request.price_hr)
        if request.market == "spot":
            payload["price"] = price  # an interruptible (bid) rental at this price
        answer = self._create(ask, payload, request.token)
        # a str: made by a try whose answer was lost, found by its label
        contract = answer if isinstance(answer, str) else self._created(answer, ask)
        meta: dict[str, Any] = {"offer": ask}
        if "gpu_name" in offer:
            meta["machine"] = (f"ask {ask}: {offer.get('num_gpus')} x {offer.get('gpu_name')}, "
                               f"{offer.get('geolocation')}, {price:g} USD/h, machine "
                               f"{offer.get('machine_id')}, reliability "
                               f"{offer.get('reliability2', offer.get('reliability'))}")
        return Resource(provider=self.name, resource_id=contract, token=request.token,
                        region=str(offer.get("geolocation") or request.region),
                        price_hr=price, meta=meta)

    def _created(self, answer: httpx.Response, ask: str) -> str:
        """The new instance id from a create's answer."""
        body = self._body(answer, "create")
        if answer.status_code == 404 or "no_such_ask" in str(body.get("msg", "")):
            raise CapacityError(f"vast offer {ask} is already taken: {body.get('msg')}",
                                hint="search again (`gpucost compare --provider vast`) and "
                                     "plan with a current offer")
        if answer.status_code >= 400 or not body.get("success"):
            raise ProviderError(f"vast create failed: HTTP {answer.status_code} "
                                f"{body.get('error')}: {body.get('msg')}")
        return str(body["new_contract"])

    def _create(self, ask: str, payload: Mapping[str, Any], token: str) -> httpx.Response | str:
        """PUT the create once per try. A 429 was refused unread and is retried; after a 5xx or
        a lost answer the create may have happened, so the instance list decides: an instance
        with our label is the answer, none means the create can be sent again."""
        import httpx

        from gpucost.http import RETRY_STATUSES

        client = self._http().client
        last = ""
        for attempt in range(1, self.max_attempts + 1):
            try:
                answer = client.put(f"/api/v0/asks/{ask}/", json=dict(payload),
                                    timeout=self.timeout_s)
            except (httpx.TimeoutException, httpx.TransportError) as err:
                last = f"{type(err).__name__}"
            else:
                if answer.status_code in (401, 403):
                    raise CredentialsError(f"vast create: refused with HTTP "
                                           f"{answer.status_code}", hint="check VAST_API_KEY")
                if answer.status_code not in RETRY_STATUSES:
                    return answer
                last = f"HTTP {answer.status_code}"
                if answer.status_code == 429:
                    time.sleep(self.backoff_s * 2 ** (attempt - 1))
                    continue
            time.sleep(self.backoff_s * 2 ** (attempt - 1))
            made = self.find(token)  # raises when Vast cannot say: then nothing is retried
            if made:
                return made[0].resource_id
        raise ProviderError(f"vast create on ask {ask}: no answer after {self.max_attempts} "
                            f"tries ({last}) and no instance labelled {token}",
                            hint="Vast is unavailable; retry later, then `gpucost cleanup`")

    def _instance(self, resource_id: str) -> dict[str, Any] | None:
        answer = self._request("GET", f"/api/v0/instances/{resource_id}/", "show instance")
        if answer.status_code == 404:
            return None
        found = self._body(answer, "show instance").get("instances")
        return found if isinstance(found, dict) and found else None

    def wait(self, resources: Sequence[Resource], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            states = {r.resource_id: self.status(r) for r in resources}
            if all(s == "running" for s in states.values()):
                return
            if any(s in ("exited", "destroyed") for s in states.values()):
                raise CapacityError(f"vast instance(s) ended before running: {states}")
            if time.monotonic() >= deadline:
                raise ProviderError(f"vast instances not running after {timeout_s:g} s: "
                                    f"{states}", hint="the host may be slow to pull the image")
            time.sleep(self.poll_s)

    def run(self, resources: Sequence[Resource], job: JobSpec) -> Resource:
        # The onstart script started the job when the container came up.
        first = resources[0]
        return Resource(provider=self.name, resource_id=first.resource_id, token=first.token,
                        region=first.region, kind="job", meta=first.meta)

    def status(self, resource: Resource) -> ResourceState:
        found = self._instance(resource.resource_id)
        if found is None:
            return "destroyed"
        if found.get("intended_status") == "stopped":
            return "stopped"
        return _STATES.get(str(found.get("actual_status")), "unknown")

    def exit_code(self, resource: Resource) -> int | None:
        """0 once the onstart script has stopped its own instance (the launcher never stops a
        running job's instance); the job's own exit status is in its log in the container."""
        found = self._instance(resource.resource_id)
        if found is None:
            return 1  # destroyed under the run: not by the job
        return 0 if found.get("intended_status") == "stopped" else None

    def stop(self, resource: Resource) -> None:
        answer = self._request("PUT", f"/api/v0/instances/{resource.resource_id}/", "stop",
                               json={"state": "stopped"})
        if answer.status_code >= 400:
            raise ProviderError(f"vast stop {resource.resource_id}: HTTP {answer.status_code}")

    def destroy(self, resource: Resource) -> None:
        answer = self._request("DELETE", f"/api/v0/instances/{resource.resource_id}/",
                               "destroy")
        if answer.status_code >= 400 and answer.status_code != 404:  # 404: already gone
            raise ProviderError(f"vast destroy {resource.resource_id}: HTTP "
                                f"{answer.status_code}")

    def find(self, token: str) -> list[Resource]:
        answer = self._request("GET", "/api/v0/instances/", "list instances")
        if answer.status_code >= 400:  # an error is no answer, least of all "none"
            raise ProviderError(f"vast list instances: HTTP {answer.status_code}: "
                                f"{answer.text[:200]}",
                                hint="the intent stays in the ledger; `gpucost cleanup` looks "
                                     "again")
        found = self._body(answer, "list instances").get("instances")
        if not isinstance(found, list):
            raise ProviderError("vast list instances: the answer has no instances list")
        return [Resource(provider=self.name, resource_id=str(i["id"]), token=token,
                         meta={"offer": str(i.get("ask_contract_id", ""))})
                for i in found if i.get("label") == token]

"""Device strings as in TensorFlow: ``/job:J/replica:R/task:T/device:TYPE:N``.

>>> DeviceSpec.parse("/job:ps/task:1/cpu:0").to_string()
'/job:ps/task:1/device:CPU:0'
>>> DeviceSpec.parse("/gpu:0").merged_over(DeviceSpec.parse("/job:worker/task:0")).to_string()
'/job:worker/task:0/device:GPU:0'
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from .errors import InvalidArgumentError

_PART = re.compile(r"^(job|replica|task|device|cpu|gpu|CPU|GPU):(.+)$")
_FLOATING = re.compile(r"^\*[A-Za-z0-9_]*$")  # task:* or task:*<group>


@dataclass(frozen=True)
class DeviceSpec:
    job: str | None = None
    replica: int | None = None
    task: int | str | None = None  # a str: floating, "*" or "*<group>" (see ``floating``)
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def parse(cls, spec: str | DeviceSpec | None) -> DeviceSpec:
        """Parse a full or partial device string; raise InvalidArgumentError if malformed."""
        if spec is None or spec == "":
            return cls()
        if isinstance(spec, DeviceSpec):
            return spec
        if not isinstance(spec, str):
            raise InvalidArgumentError(f"device must be a string, got {spec!r}")
        if cls is DeviceSpec:
            return _parse_cached(spec)  # planning parses every node's device: few distinct
        return cls._parse(spec)

    @classmethod
    def _parse(cls, spec: str) -> DeviceSpec:
        fields: dict = {}
        parts = [p for p in spec.split("/") if p]
        if not spec.startswith("/") and len(parts) != 1:
            raise InvalidArgumentError(f"malformed device string {spec!r}")
        for part in parts:
            m = _PART.match(part)
            if not m:
                raise InvalidArgumentError(
                    f"malformed device string {spec!r}: cannot parse {part!r} "
                    "(expected /job:NAME/replica:N/task:N/device:CPU|GPU:N)")
            key, val = m.group(1), m.group(2)
            try:
                if key == "job":
                    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", val):
                        raise ValueError
                    fields["job"] = val
                elif key == "task" and val.startswith("*"):
                    if not _FLOATING.match(val):
                        raise ValueError
                    fields["task"] = val  # floating: any task of the job (see ``floating``)
                elif key in ("replica", "task"):
                    fields[key] = int(val)
                    if fields[key] < 0:
                        raise ValueError
                elif key == "device":
                    dtype, _, idx = val.partition(":")
                    if dtype.upper() not in ("CPU", "GPU"):
                        raise ValueError
                    fields["device_type"] = dtype.upper()
                    fields["device_index"] = None if idx in ("", "*") else int(idx)
                else:  # cpu:N / gpu:N shorthand
                    fields["device_type"] = key.upper()
                    fields["device_index"] = None if val == "*" else int(val)
            except ValueError:
                raise InvalidArgumentError(
                    f"malformed device string {spec!r}: bad value in {part!r}") from None
        return cls(**fields)

    def merged_over(self, outer: DeviceSpec) -> DeviceSpec:
        """Fields set here win; unset fields come from ``outer`` (the enclosing scope)."""
        if type(self) is DeviceSpec and type(outer) is DeviceSpec:
            return _merged_cached(self, outer)
        return self._merged_over(outer)

    def _merged_over(self, outer: DeviceSpec) -> DeviceSpec:
        return DeviceSpec(*(a if a is not None else b for a, b in zip(
            (self.job, self.replica, self.task, self.device_type, self.device_index),
            (outer.job, outer.replica, outer.task, outer.device_type, outer.device_index))))

    def conflicts_with(self, other: DeviceSpec) -> bool:
        """Whether the two specs give different values for a field both set (job, replica, task,
        device type or index)."""
        pairs = zip((self.job, self.replica, self.task, self.device_type, self.device_index),
                    (other.job, other.replica, other.task, other.device_type, other.device_index))
        return any(a is not None and b is not None and a != b for a, b in pairs)

    def with_defaults(self, job="localhost", replica=0, task=0, device_type="CPU", index=0):
        """Unset fields filled in: ``/job:localhost/replica:0/task:0/device:CPU:0``."""
        return _defaults_cached(self, job, replica, task, device_type, index)

    def _with_defaults(self, job, replica, task, device_type, index):
        return replace(
            self,
            job=self.job if self.job is not None else job,
            replica=self.replica if self.replica is not None else replica,
            task=self.task if self.task is not None else task,
            device_type=self.device_type or device_type,
            device_index=self.device_index if self.device_index is not None else index)

    def to_string(self) -> str:
        """The canonical string, ``/job:<job>/replica:<r>/task:<t>/device:<TYPE>:<i>`` with the
        fields that are set."""
        out = self.__dict__.get("_string")
        if out is None:  # memoised: frozen, and planning prints every node's device
            out = self._to_string()
            object.__setattr__(self, "_string", out)
        return out

    def _to_string(self) -> str:
        out = ""
        if self.job is not None:
            out += f"/job:{self.job}"
        if self.replica is not None:
            out += f"/replica:{self.replica}"
        if self.task is not None:
            out += f"/task:{self.task}"
        if self.device_type is not None:
            idx = "*" if self.device_index is None else self.device_index
            out += f"/device:{self.device_type}:{idx}"
        return out

    @property
    def floating(self) -> bool:
        """Whether the task is ``*`` (any task of the job) or ``*<group>`` (any task, as one
        named group of ops): stateless ops placed there run wherever Dask schedules them.

        >>> DeviceSpec.parse("/job:worker/task:*map3").floating
        True
        """
        return isinstance(self.task, str)

    @property
    def task_name(self) -> str:
        """The logical task this device belongs to, as a worker name: ``ps-0``."""
        return f"{self.job or 'localhost'}-{self.task or 0}"

    def __str__(self) -> str:
        return self.to_string()


@functools.lru_cache(maxsize=4096)
def _parse_cached(spec: str) -> DeviceSpec:
    return DeviceSpec._parse(spec)  # frozen: safe to share; errors are not cached


@functools.lru_cache(maxsize=4096)
def _defaults_cached(spec: DeviceSpec, *defaults) -> DeviceSpec:
    return spec._with_defaults(*defaults)


@functools.lru_cache(maxsize=4096)
def _merged_cached(inner: DeviceSpec, outer: DeviceSpec) -> DeviceSpec:
    return inner._merged_over(outer)


def canonical(spec: str | None) -> str:
    return DeviceSpec.parse(spec).to_string()

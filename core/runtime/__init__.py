"""Running steps: the session, its backends, the Dask plane, the direct plane and the mapping
of a cluster's logical tasks onto Dask workers."""
from ..vm import services as _services


def _data_plane(worker):
    """This worker's data plane (the rendezvous a loop's shards exchange values through)."""
    from .worker_extension import install
    return install(worker).data_plane


def _device_resource(job: str, task: int) -> str:
    """The Dask resource that pins a logical task's device to its worker."""
    from .cluster.device_map import resource_name
    return resource_name(job, task)


# what loop kernels ask of the runtime (tensorvm.vm.services; the op families do not import it)
_services.provide("data_plane", _data_plane)
_services.provide("device_resource", _device_resource)

"""An in-repo fake Kubernetes API server for tests: the real client over real HTTP against it.

`FakeKube` serves core/v1, policy/v1, scheduling.k8s.io/v1 and the Koordinator custom resources
from memory, with list/watch, patches, pods/binding, pods/eviction and fault injection.
"""

from tests.fakekube.faults import Fault, FaultPlan
from tests.fakekube.server import FakeKube

__all__ = ["FakeKube", "Fault", "FaultPlan"]

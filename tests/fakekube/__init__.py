"""An in-repo fake Kubernetes API server for tests: the real client over real HTTP against it.

`FakeKube` serves core/v1, policy/v1, scheduling.k8s.io/v1 and the Koordinator custom resources
from memory, with list/watch, patches, pods/binding, pods/eviction and fault injection. Behind the
API it plays the parts a real cluster adds: graceful pod deletion (`deletion`), a kubelet per node
that admits bound pods by capacity, affinity and cards and finishes terminating pods
(`kube.kubelet`, see `kubelet`), a disruption controller keeping budget status (`disruption`), and
an over-commit check for tests (`kube.overcommitted()`, see `overcommit`).
"""

from tests.fakekube.faults import Fault, FaultPlan
from tests.fakekube.kubelet import Kubelet, Verdict
from tests.fakekube.overcommit import Overcommit
from tests.fakekube.server import FakeKube

__all__ = ["FakeKube", "Fault", "FaultPlan", "Kubelet", "Overcommit", "Verdict"]

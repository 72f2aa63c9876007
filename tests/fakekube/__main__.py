"""Run the fake API server as a process: `python -m tests.fakekube --port 8001 --seed x.yaml`."""

from __future__ import annotations

import argparse
import signal
import threading

from tests.fakekube.server import FakeKube


def main() -> None:
    parser = argparse.ArgumentParser(description="In-memory fake Kubernetes API server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--seed", action="append", default=[], help="YAML file of objects")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for this server to FILE")
    parser.add_argument("--event-window", type=int, default=1000)
    parser.add_argument("--pod-grace-seconds", type=float, default=0.0)
    parser.add_argument("--bookmark-interval", type=float, default=5.0)
    parser.add_argument("--eviction-retry-after", type=int, default=1)
    parser.add_argument(
        "--kubelet-time-scale",
        type=float,
        default=0.0,
        help="wall seconds per second of a terminating pod's grace period (0: at once)",
    )
    parser.add_argument(
        "--kubelet-manual",
        action="store_true",
        help='terminating pods stay until POST /_fake/kubelet {"finish": true}',
    )
    parser.add_argument(
        "--no-kubelet-admission",
        action="store_true",
        help='bound pods stay Pending until POST /_fake/kubelet {"admit": true}',
    )
    args = parser.parse_args()
    fake = FakeKube(args.host, args.port, event_window=args.event_window)
    fake.settings.pod_grace_seconds = args.pod_grace_seconds
    fake.settings.bookmark_interval = args.bookmark_interval
    fake.settings.eviction_retry_after = args.eviction_retry_after
    fake.kubelet.configure(
        time_scale=args.kubelet_time_scale,
        manual=args.kubelet_manual,
        admission=not args.no_kubelet_admission,
    )
    for path in args.seed:
        fake.load(path)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    fake.start()
    if args.kubeconfig:
        fake.write_kubeconfig(args.kubeconfig)
    print(f"fakekube serving on {fake.url}", flush=True)
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


if __name__ == "__main__":
    main()

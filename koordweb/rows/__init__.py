"""Row-level writes below the backends, shared by them and the services: many rows in few
statements (`bulk`), and the pod and job states that follow the cluster (`pods`).

Backends import these (never `koordweb.services`); services build on them.
"""

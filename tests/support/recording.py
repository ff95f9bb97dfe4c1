"""A cluster that notes every permission a pass uses, for the least-privilege tests of both
processes' roles (tests/deploy): the store's ports, each call noted as (API group,
resource, verb); a list also as a watch, since the informers list and watch what a pass
lists."""

from __future__ import annotations


class Recording:
    """The store's ports, noting (API group, resource, verb) for every call."""

    def __init__(self, store, resources: dict[str, tuple[str, str]]):
        self.store, self.resources, self.used = store, resources, set()

    def note(self, kind, verb, sub=""):
        group, resource = self.resources[kind]
        self.used.add((group, resource + sub, verb))

    def snapshot(self):
        recording, reader = self, self.store.snapshot()

        class Reader:
            def get(self, kind, namespace, name):
                recording.note(kind, "get")
                return reader.get(kind, namespace, name)

            def list(self, kind, namespace=None, labels=None, fields=None):
                recording.note(kind, "list")
                recording.note(kind, "watch")
                return reader.list(kind, namespace, labels, fields)

        return Reader()

    def served(self, kinds):
        return self.store.served(kinds)  # the informers' lists say so: no permission of its own

    def create(self, obj):
        self.note(self.store.key_of(obj), "create")
        return self.store.create(obj)

    def patch(self, kind, namespace, name, patch, *, resource_version=None):
        self.note(kind, "patch")
        return self.store.patch(kind, namespace, name, patch, resource_version=resource_version)

    def patch_status(self, kind, namespace, name, patch, *, resource_version=None):
        self.note(kind, "patch", "/status")
        return self.store.patch_status(kind, namespace, name, patch, resource_version=resource_version)

    def delete(self, kind, namespace, name, **kwargs):
        self.note(kind, "delete")
        return self.store.delete(kind, namespace, name, **kwargs)

    def record_event(self, involved, type, reason, message):
        self.note("Event", "create")
        self.note("Event", "patch")  # a repeat is aggregated with a patch of its count
        return self.store.record_event(involved, type, reason, message)

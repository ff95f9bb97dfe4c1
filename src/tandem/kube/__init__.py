"""The Kubernetes adapter: the controller's Reader over informer caches, its Writer over the API (lightkube)."""

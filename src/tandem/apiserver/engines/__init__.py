"""Engine stand-ins of the local API server: a pod running SGLang or vLLM gets a small HTTP
server on its pod IP that answers as that engine does, timed by tandem's serving model
(docs/apiserver.md, "Engine stand-ins")."""

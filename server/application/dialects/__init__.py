"""The ingress dialects: one folder each, the same files in each (`service.py` the
handlers, `request.py` the translation in, `reply.py` results and events out). A
dialect imports the pipeline below it and never another dialect."""

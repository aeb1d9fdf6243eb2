"""DVC stage `vectors`: verity's filtered-vector-search experiment on faiss HNSW, with auto.

Its configuration is conf/corpus/vectors.yaml with conf/index/hnsw.yaml (declared as params
files in dvc.yaml), so the text pipeline's params.yaml stays the corpus it measures.
"""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("vectors"))

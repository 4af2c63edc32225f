"""Child of ``ab_lake_ingest.py``: one Pipeline 2 run (``run_pipeline`` until caught up) of the tree on
PYTHONPATH. Args: bootstrap, preload topic (or ``-``), timed topic, lake, records per poll. The
preload (if any) goes into the lake first, not timed; the connector modules are imported before
the timed run. Prints one JSON line: tree, events, wall (the run's elapsed s), cpu (process CPU s
of the timed run, all threads), gc (s inside the cyclic collector), batches."""
import gc, json, sys, tempfile, time
from pathlib import Path
import changelake  # noqa: E402  (the tree on PYTHONPATH, imported before the bench puts its root on sys.path)
from changelake.pipeline.runner import run_pipeline  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_lake_ingest as b  # noqa: E402  (only its _pipeline definition builder)
# warm the imports the run would do lazily (both trees alike): the sink and source modules
import changelake.connectors.iceberg, changelake.connectors.paimon, pyarrow.json, pyiceberg.table  # noqa
bootstrap, preload, timed, lake, batch = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
gct = [0.0, 0.0]
def cb(phase, info):
    if phase == "start": gct[1] = time.perf_counter()
    else: gct[0] += time.perf_counter() - gct[1]
with tempfile.TemporaryDirectory(prefix="changelake-ab-") as tmp:
    lake_dir = Path(tmp)
    if preload != "-":
        run_pipeline(b._pipeline(bootstrap, preload, lake_dir, lake), until_caught_up=True, batch_size=batch)
    defn = b._pipeline(bootstrap, timed, lake_dir, lake)
    if preload != "-":  # same pipeline name as the preload's, so its checkpoint and table carry on
        defn = b._pipeline(bootstrap, preload, lake_dir, lake)
        from dataclasses import replace
        src = dict(defn.source); src["topic"] = f"{preload};{timed}"
        defn = replace(defn, source=src)
    gc.callbacks.append(cb)
    c0 = time.process_time()
    stats = run_pipeline(defn, until_caught_up=True, batch_size=batch)
    cpu = time.process_time() - c0
    gc.callbacks.remove(cb)
print(json.dumps({"tree": str(Path(changelake.__file__).parents[1]), "events": stats.events, "wall": stats.elapsed_s,
                  "cpu": cpu, "gc": gct[0], "batches": stats.batches}))

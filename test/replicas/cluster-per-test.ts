import { afterEach, beforeAll } from "vitest";
import { ensureBuilt } from "../server/cli-process.js";
import { ReplicaCluster } from "./replicas-harness.js";

/**
 * The vitest side of the replica harness (which stays free of vitest, for the bench): in the
 * calling describe block, builds the CLI once before the tests and stops each test's cluster
 * after it. Returns what starts a test's cluster, with a data dir named `<tmpPrefix>XXXXXX`.
 */
export function clusterPerTest(tmpPrefix: string): () => Promise<ReplicaCluster> {
  let cluster: ReplicaCluster | undefined;

  beforeAll(() => {
    ensureBuilt();
  }, 120_000);

  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  return async () => {
    cluster = await ReplicaCluster.start(tmpPrefix);
    return cluster;
  };
}

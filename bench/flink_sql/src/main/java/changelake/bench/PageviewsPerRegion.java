package changelake.bench;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;

/**
 * The seed's page-views query on Flink SQL, run on a MiniCluster inside this JVM (the peer of
 * changelake.pageviews in bench/bench_pageviews.py).
 *
 * <pre>
 * java -cp target/classes:target/deps/* changelake.bench.PageviewsPerRegion \
 *     BOOTSTRAP SOURCE_TOPIC SINK_TOPIC GROUP_ID [PARALLELISM] [MINI_BATCH true|false]
 * </pre>
 *
 * The source table reads SOURCE_TOPIC from the earliest offset to the end offsets at start
 * ('scan.bounded.mode' = 'latest-offset'), so the job finishes once it has read everything; the
 * sink is upsert-kafka with avro key and value, as the seed. Prints one JSON line on stdout:
 * {"jvm_to_submit_s": ..., "job_s": ..., "process_s": ...} (seconds; process_s from JVM start).
 */
public final class PageviewsPerRegion {
    private PageviewsPerRegion() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: PageviewsPerRegion BOOTSTRAP SOURCE_TOPIC SINK_TOPIC GROUP_ID [PARALLELISM] [MINI_BATCH]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String source = args[1];
        String sink = args[2];
        String group = args[3];
        int parallelism = args.length > 4 ? Integer.parseInt(args[4]) : Runtime.getRuntime().availableProcessors();
        boolean miniBatch = args.length > 5 && Boolean.parseBoolean(args[5]);
        long jvmStartMs = java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime();

        Configuration conf = new Configuration();
        conf.setString("parallelism.default", Integer.toString(parallelism));
        if (miniBatch) {
            conf.setString("table.exec.mini-batch.enabled", "true");
            conf.setString("table.exec.mini-batch.allow-latency", "1 s");
            conf.setString("table.exec.mini-batch.size", "2000");
        }
        TableEnvironment tEnv = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());

        tEnv.executeSql(
                "CREATE TABLE pageviews (\n"
                        + "  user_id BIGINT,\n"
                        + "  page_id BIGINT,\n"
                        + "  viewtime TIMESTAMP(3),\n"
                        + "  user_region STRING,\n"
                        + "  WATERMARK FOR viewtime AS viewtime - INTERVAL '2' SECOND\n"
                        + ") WITH (\n"
                        + "  'connector' = 'kafka',\n"
                        + "  'topic' = '" + source + "',\n"
                        + "  'properties.bootstrap.servers' = '" + bootstrap + "',\n"
                        + "  'properties.group.id' = '" + group + "',\n"
                        + "  'scan.startup.mode' = 'earliest-offset',\n"
                        + "  'scan.bounded.mode' = 'latest-offset',\n"
                        + "  'format' = 'json'\n"
                        + ")");
        tEnv.executeSql(
                "CREATE TABLE pageviews_per_region (\n"
                        + "  user_region STRING,\n"
                        + "  pv BIGINT,\n"
                        + "  uv BIGINT,\n"
                        + "  PRIMARY KEY (user_region) NOT ENFORCED\n"
                        + ") WITH (\n"
                        + "  'connector' = 'upsert-kafka',\n"
                        + "  'topic' = '" + sink + "',\n"
                        + "  'properties.bootstrap.servers' = '" + bootstrap + "',\n"
                        + "  'key.format' = 'avro',\n"
                        + "  'value.format' = 'avro'\n"
                        + ")");
        long submitMs = System.currentTimeMillis();
        TableResult result = tEnv.executeSql(
                "INSERT INTO pageviews_per_region\n"
                        + "SELECT user_region, COUNT(*), COUNT(DISTINCT user_id)\n"
                        + "FROM pageviews\n"
                        + "GROUP BY user_region");
        result.await();
        long endMs = System.currentTimeMillis();
        System.out.printf(java.util.Locale.ROOT,
                "{\"jvm_to_submit_s\": %.3f, \"job_s\": %.3f, \"process_s\": %.3f, \"parallelism\": %d, \"mini_batch\": %s}%n",
                (submitMs - jvmStartMs) / 1000.0, (endMs - submitMs) / 1000.0, (endMs - jvmStartMs) / 1000.0,
                parallelism, miniBatch);
        System.exit(0);
    }
}

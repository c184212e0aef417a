/*
 * The real-Flink diagnosis corpus: jobs with a known bottleneck (or none, or two) by
 * construction, for tests/benchmarks/bench_flink_diagnosis.py and tests/collectors/flink/
 * test_corpus.py. What each job's diagnosis must name is declared in tests/collectors/flink/
 * corpus.py, in one table.
 *
 * Usage: BpmonCorpusJobs JOB [LOAD] [PARALLELISM] [pending=false] [backlog=SECONDS]
 *
 * LOAD is the bottleneck's utilisation, offered rate / capacity (for a healthy job: its busiest
 * subtask's); every source rate below is derived from it. Sources are PacedSource (CorpusParts):
 * records are offered at the rate whether or not they are read, and what is owed is reported as
 * FLIP-33 pendingRecords (``pending=false``: not reported, so bpmon has to estimate the offered
 * rate). Each source's true offered rate is published in the job's global parameters (GET
 * /jobs/{id}/config, user-config: ``bpmon.offered.NAME`` records/s), for the tests to compare
 * bpmon's figures with; bpmon itself never reads them. Costs sleep (a call to another system: busy for Flink and for a stack
 * sample, the shared CPU left to others) except in parse-cpu, long-chain and source-chained,
 * which spin on the CPU as a parser would (one core each at most: parallelism 1).
 *
 * Capacity of a subtask = 1 / its cost per record. At LOAD L:
 *
 * async-lookup    events (L x 1000/s) -> lookup (async I/O, 4 in flight, 4 ms each: capacity
 *                 4 / 4 ms = 1000/s) -> out. lookup waits for a free slot in its queue.
 * slow-timers     events (L x 2000/s) -> keyBy(1000 keys) -> sessionize (2 subtasks; each record
 *                 sets an event-time timer 20-39 ms later, each timer sleeps 1 ms: 1000/s a
 *                 subtask; watermarks every 200 ms fire them) -> out.
 * interval-join   orders (500/s) + payments (L x 1000/s) -> verify-payment (1 ms: 1000/s) on the
 *                 payments side only -> match (interval join, +-2 s, event time) -> out.
 * zipf-agg        events (L x 1000 / h /s) -> pick-key (Zipf s=1.2 over 500 keys) -> keyBy ->
 *                 aggregate (8 subtasks, 1 ms: 1000/s each) -> out; h = the largest share of the
 *                 records one subtask receives, by Flink's key groups (~0.3): the hot subtask is
 *                 at L, wherever the hot keys land; the others at L x share / h.
 * batch-sink      events (L x 833/s) -> format -> warehouse (writes 100 records at once: 20 ms +
 *                 1 ms a record = 120 ms per 100 records: 833/s).
 * network         events (L x 2000/s) -> inflate (32 KB a record) -> rebalance -> digest (2
 *                 subtasks, no cost) -> out; on two TaskManagers one channel crosses TCP. On
 *                 loopback the link carries ~100 MB/s easily: the case shows whether bpmon
 *                 blames the exchange, not a link known to be short.
 * long-chain      events (L x 1000/s) -> parse (50 us CPU) -> validate (50) -> enrich (800) ->
 *                 normalize (50) -> tag (50), one chain of 1 ms a record (1000/s) -> out. enrich
 *                 takes 80% of the chain's time.
 * source-chained  events (L x 2000/s) -> decode (500 us CPU, chained to the source: 2000/s) ->
 *                 out. Nothing is backpressured; the source's pendingRecords grow by (L - 1) x
 *                 2000/s.
 * decoy           events (L x 1000/s) -> dedupe (850 us) -> score (1 ms: 1000/s) -> out. dedupe
 *                 runs at score's 1000/s: 85% busy, sufficient.
 * two-bottlenecks clicks (L x 1000/s) -> geo (1 ms) -> clicks-out; orders (L x 1000/s) -> fraud
 *                 (1 ms) -> orders-out: two independent pipelines, each at L.
 * short-of-slots  events (500/s) -> work (PARALLELISM subtasks, 0.5 ms) -> out; PARALLELISM above
 *                 the cluster's slots: the job waits for slots.
 * healthy         events (L x 2000/s) -> enrich (2 subtasks, 1 ms) -> out; L = 0.65 in the corpus.
 * healthy-keyed   events (L x 500 / h /s) -> pick-key (100 keys) -> keyBy -> count (4 subtasks,
 *                 2 ms: 500/s each) -> out; the busiest subtask at L (0.6 in the corpus).
 * parse-cpu       events (L x 2000/s) -> parse-json (500 us CPU: 2000/s) -> out.
 * hot-key         events (L x 1000 / h /s) -> pick-key (one key with half of the records, 1000
 *                 cold keys) -> keyBy -> count (4 subtasks, 1 ms) -> out; h ~ 0.62: the hot
 *                 subtask at L, the others at ~L x 0.2.
 * slow-sink       events (L x 2000/s) -> format -> db (2 subtasks, 1 ms a record: 1000/s each).
 * slow-instance   events (L x 4 x 333/s) -> enrich (4 subtasks over rebalance, 1 ms; subtask 2
 *                 3 ms: 333/s) -> out. Round robin holds every channel to the slow one's pace:
 *                 the job moves 4 x 333/s, subtask 2 at L, the others at ~33%.
 * catch-up        events (L x PARALLELISM x 1000/s, and a backlog of ``backlog`` seconds of that
 *                 rate, 60 by default, owed from the job's submission) -> work (PARALLELISM
 *                 subtasks, 1 ms: PARALLELISM x 1000/s) -> out. A job restarted after an outage:
 *                 with L < 1 work keeps up with the arrival rate, so the source reads at work's
 *                 capacity and the backlog drains at only (1 - L) x PARALLELISM x 1000/s. What
 *                 is owed is carried over restarts (rescales): the source runs at parallelism 1.
 *                 ``bpmon.backlog.events`` in the user-config: the records owed at submission.
 */

import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.datastream.AsyncDataStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.util.Collector;

public class BpmonCorpusJobs {

    /** The job's true figures, published as its global parameters (the REST API's
     * user-config): what each source offers, and owes at the start. */
    static final class Published extends ExecutionConfig.GlobalJobParameters {
        private final TreeMap<String, String> values = new TreeMap<>();

        void put(String key, double value) {
            values.put(key, String.valueOf(value));
        }

        @Override
        public Map<String, String> toMap() {
            return values;
        }
    }

    static final Published PUBLISHED = new Published();
    /** ``pending=false``: the sources report no pendingRecords. */
    static boolean pending = true;
    /** ``backlog=SECONDS``: the catch-up job's backlog, in seconds of its offered rate. */
    static double backlogSeconds = 60;

    static CorpusParts.PacedSource paced(String name, double rate) {
        PUBLISHED.put("bpmon.offered." + name, rate);
        return new CorpusParts.PacedSource(rate, pending, 0, 0);
    }

    static DataStream<Long> source(StreamExecutionEnvironment env, String name, double rate) {
        return env.fromSource(paced(name, rate), WatermarkStrategy.noWatermarks(), name);
    }

    static DataStream<Long> timedSource(StreamExecutionEnvironment env, String name, double rate) {
        WatermarkStrategy<Long> wall =
                WatermarkStrategy.<Long>forMonotonousTimestamps()
                        .withTimestampAssigner((v, ts) -> System.currentTimeMillis());
        return env.fromSource(paced(name, rate), wall, name);
    }

    /** A source at parallelism 1 that owes ``backlog`` records at submission (see catch-up). */
    static DataStream<Long> backlogSource(
            StreamExecutionEnvironment env, String name, double rate, long backlog) {
        PUBLISHED.put("bpmon.offered." + name, rate);
        PUBLISHED.put("bpmon.backlog." + name, backlog);
        CorpusParts.PacedSource paced =
                new CorpusParts.PacedSource(rate, pending, backlog, System.currentTimeMillis());
        return env.fromSource(paced, WatermarkStrategy.noWatermarks(), name).setParallelism(1);
    }

    static <T> void out(DataStream<T> stream, String name) {
        stream.sinkTo(new CorpusParts.SlowSink<T>(0)).name(name).disableChaining();
    }

    static SingleOutputStreamOperator<Long> sleep(DataStream<Long> in, String name, long micros) {
        return in.map(new CorpusParts.SleepMap(micros)).name(name).disableChaining();
    }

    static DataStream<Long> spinChained(DataStream<Long> in, String name, long micros) {
        return in.map(new CorpusParts.SpinMap(micros)).name(name);
    }

    /** Sets an event-time timer 20-39 ms after each record; each timer costs ``micros``. Event
     * time on purpose: a watermark fires its timers inside the task's input processing, so
     * slow timers hold the input back (backpressure). Slow processing-time timers fire as mails
     * between records instead: the input keeps up and the timers' backlog grows in the heap. */
    static final class Sessionize extends KeyedProcessFunction<Long, Long, Long> {
        private final long micros;
        private transient CorpusParts.Sleep cost;

        Sessionize(long micros) {
            this.micros = micros;
        }

        @Override
        public void open(OpenContext context) {
            cost = new CorpusParts.Sleep(micros);
        }

        @Override
        public void processElement(Long value, Context ctx, Collector<Long> out) {
            ctx.timerService().registerEventTimeTimer(ctx.timestamp() + 20 + Math.floorMod(value, 20));
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<Long> out)
                throws InterruptedException {
            cost.pay();
            out.collect(ctx.getCurrentKey());
        }
    }

    static final class Match extends ProcessJoinFunction<Long, Long, Long> {
        @Override
        public void processElement(Long left, Long right, Context ctx, Collector<Long> out) {
            out.collect(left);
        }
    }

    static DataStream<Long> keyed(
            StreamExecutionEnvironment env, CorpusParts.KeyPlan plan, double rate) {
        return source(env, "events", rate).map(new CorpusParts.PickKey(plan)).name("pick-key");
    }

    static void build(StreamExecutionEnvironment env, String job, double load, int width) {
        switch (job) {
            case "async-lookup": {
                DataStream<Long> events = source(env, "events", load * 1000);
                DataStream<Long> looked =
                        AsyncDataStream.unorderedWait(
                                        events,
                                        new CorpusParts.Lookup(4000),
                                        10,
                                        TimeUnit.SECONDS,
                                        4)
                                .name("lookup")
                                .disableChaining();
                out(looked, "out");
                break;
            }
            case "slow-timers":
                out(
                        timedSource(env, "events", load * 2000)
                                .keyBy(v -> v % 1000)
                                .process(new Sessionize(1000))
                                .name("sessionize")
                                .setParallelism(2)
                                .disableChaining(),
                        "out");
                break;
            case "interval-join": {
                DataStream<Long> orders = timedSource(env, "orders", 500);
                DataStream<Long> payments =
                        sleep(timedSource(env, "payments", load * 1000), "verify-payment", 1000);
                out(
                        orders.keyBy(v -> v)
                                .intervalJoin(payments.keyBy(v -> v))
                                .between(Duration.ofSeconds(-2), Duration.ofSeconds(2))
                                .process(new Match())
                                .name("match")
                                .disableChaining(),
                        "out");
                break;
            }
            case "zipf-agg": {
                CorpusParts.KeyPlan plan = CorpusParts.KeyPlan.zipf(500, 1.2, 8);
                DataStream<Long> keys = keyed(env, plan, load * 1000 / plan.hottest());
                out(
                        keys.keyBy(v -> v)
                                .map(new CorpusParts.SleepMap(1000))
                                .name("aggregate")
                                .setParallelism(8)
                                .disableChaining(),
                        "out");
                break;
            }
            case "batch-sink":
                source(env, "events", load * 833)
                        .map(v -> v)
                        .returns(Types.LONG)
                        .name("format")
                        .sinkTo(new CorpusParts.BatchSink<Long>(100, 20_000, 1000))
                        .name("warehouse")
                        .disableChaining();
                break;
            case "network": {
                DataStream<byte[]> big =
                        source(env, "events", load * 2000)
                                .map(v -> new byte[32 * 1024])
                                .returns(byte[].class)
                                .name("inflate");
                out(
                        big.rebalance()
                                .map(b -> (long) b.length + b[0])
                                .returns(Types.LONG)
                                .name("digest")
                                .setParallelism(2)
                                .disableChaining(),
                        "out");
                break;
            }
            case "long-chain": {
                DataStream<Long> chain =
                        source(env, "events", load * 1000)
                                .map(new CorpusParts.SpinMap(50))
                                .name("parse")
                                .startNewChain();
                chain = spinChained(chain, "validate", 50);
                chain = spinChained(chain, "enrich", 800);
                chain = spinChained(chain, "normalize", 50);
                chain = spinChained(chain, "tag", 50);
                out(chain, "out");
                break;
            }
            case "source-chained":
                out(spinChained(source(env, "events", load * 2000), "decode", 500), "out");
                break;
            case "decoy":
                out(sleep(sleep(source(env, "events", load * 1000), "dedupe", 850), "score", 1000),
                        "out");
                break;
            case "two-bottlenecks":
                out(sleep(source(env, "clicks", load * 1000), "geo", 1000), "clicks-out");
                out(sleep(source(env, "orders", load * 1000), "fraud", 1000), "orders-out");
                break;
            case "short-of-slots":
                out(sleep(source(env, "events", 500), "work", 500).setParallelism(width), "out");
                break;
            case "healthy":
                out(sleep(source(env, "events", load * 2000), "enrich", 1000).setParallelism(2),
                        "out");
                break;
            case "healthy-keyed": {
                CorpusParts.KeyPlan plan = CorpusParts.KeyPlan.uniform(100, 4);
                out(
                        keyed(env, plan, load * 500 / plan.hottest())
                                .keyBy(v -> v)
                                .map(new CorpusParts.SleepMap(2000))
                                .name("count")
                                .setParallelism(4)
                                .disableChaining(),
                        "out");
                break;
            }
            case "parse-cpu":
                out(
                        source(env, "events", load * 2000)
                                .map(new CorpusParts.SpinMap(500))
                                .name("parse-json")
                                .disableChaining(),
                        "out");
                break;
            case "hot-key": {
                CorpusParts.KeyPlan plan = CorpusParts.KeyPlan.hot(0.5, 1000, 4);
                out(
                        keyed(env, plan, load * 1000 / plan.hottest())
                                .keyBy(v -> v)
                                .map(new CorpusParts.SleepMap(1000))
                                .name("count")
                                .setParallelism(4)
                                .disableChaining(),
                        "out");
                break;
            }
            case "slow-sink":
                source(env, "events", load * 2000)
                        .map(v -> v)
                        .returns(Types.LONG)
                        .name("format")
                        .sinkTo(new CorpusParts.SlowSink<Long>(1000))
                        .name("db")
                        .setParallelism(2)
                        .disableChaining();
                break;
            case "slow-instance":
                out(
                        source(env, "events", load * 4 * 1000 / 3.0)
                                .map(new CorpusParts.SlowInstanceMap(1000, 3000, 2))
                                .name("enrich")
                                .setParallelism(4)
                                .disableChaining(),
                        "out");
                break;
            case "catch-up": {
                double rate = load * width * 1000;
                DataStream<Long> events =
                        backlogSource(env, "events", rate, (long) (backlogSeconds * rate));
                out(sleep(events, "work", 1000).setParallelism(width), "out");
                break;
            }
            default:
                throw new IllegalArgumentException("unknown corpus job " + job);
        }
    }

    public static void main(String[] args) throws Exception {
        String job = args.length > 0 ? args[0] : "healthy";
        double load = args.length > 1 ? Double.parseDouble(args[1]) : 1.6;
        int width = args.length > 2 ? Integer.parseInt(args[2]) : 10;
        PUBLISHED.values.clear(); // one JVM may build several jobs (statics kept between them)
        pending = true;
        backlogSeconds = 60;
        for (int i = 3; i < args.length; i++) {
            String[] option = args[i].split("=", 2);
            if (option.length == 2 && option[0].equals("pending")) {
                pending = Boolean.parseBoolean(option[1]);
            } else if (option.length == 2 && option[0].equals("backlog")) {
                backlogSeconds = Double.parseDouble(option[1]);
            } else {
                throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        build(env, job, load, width);
        PUBLISHED.put("bpmon.pending", pending ? 1 : 0);
        env.getConfig().setGlobalJobParameters(PUBLISHED);
        env.execute("bpmon-corpus-" + job);
    }
}

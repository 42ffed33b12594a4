//! The segment layout's unit tests.

use super::*;

#[test]
fn the_request_ring_count_is_the_layout_s() {
    for executors in [1, 2, 5] {
        let ring_bytes = MESSAGE_RING_BYTES * 4;
        let layout = segment_layout(&SegmentSizes {
            executors,
            operators: 2,
            ring_bytes,
            max_frame_bytes: 1024,
        })
        .unwrap();
        let request = (layout.rings.iter())
            .filter(|r| r.config.capacity_bytes == ring_bytes)
            .count();
        assert_eq!(
            request,
            RingIndex { executors }.request_rings(),
            "{executors}"
        );
    }
}

fn segment(tag: &str) -> WorkerSegment {
    test_segment(
        &format!("clasp-layout-test-{tag}-{}", std::process::id()),
        3,
    )
}

#[test]
fn every_counter_of_a_block_is_reachable_and_blocks_are_apart() {
    let seg = segment("reach");
    let (a, b) = (seg.metrics(0), seg.metrics(1));
    let last = a.edge_remote(2, 2);
    a.set(scalar::FRAMES_IN, 7);
    a.add(last, 3);
    assert_eq!((a.get(scalar::FRAMES_IN), a.get(last)), (7, 3));
    assert_eq!((b.get(scalar::FRAMES_IN), b.get(last)), (0, 0));
    let own = seg.executor_metrics(1);
    own.view().add(scalar::PARKS, 2);
    assert_eq!(seg.metrics(1).get(scalar::PARKS), 2);
}

#[test]
#[should_panic]
fn a_counter_outside_the_block_panics() {
    let seg = segment("outside");
    let m = seg.metrics(0);
    m.get(MetricsView::slots(3) + 1);
}

#[test]
#[should_panic]
fn an_executor_the_segment_does_not_have_panics() {
    let _ = segment("executor").metrics(2);
}

#[test]
fn attaching_checks_the_app() {
    let seg = segment("attach");
    let name = seg.segment.name().expect("a named segment").to_owned();
    assert!(WorkerSegment::attach(&name, 3, 0).is_ok());
    assert!(matches!(
        WorkerSegment::attach(&name, 4, 0),
        Err(LayoutError::OtherApp { .. })
    ));
}

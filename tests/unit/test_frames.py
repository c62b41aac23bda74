"""The exec stream framing survives any split of the byte stream."""

from paddock.wire import frames as _frames


def test_frames_round_trip_across_arbitrary_splits() -> None:
    wire = (
        _frames.encode(_frames.STDOUT, b"hello\n")
        + _frames.encode(_frames.STDERR, b"\x00\xffbinary")
        + _frames.encode(_frames.STDOUT, b"")
        + _frames.encode_json(_frames.EXIT, {"exit_code": 7})
    )
    for step in (1, 2, 3, 5, 7, len(wire)):
        decoder = _frames.FrameDecoder()
        got = []
        for i in range(0, len(wire), step):
            got.extend(decoder.feed(wire[i : i + step]))
        assert got == [
            (_frames.STDOUT, b"hello\n"),
            (_frames.STDERR, b"\x00\xffbinary"),
            (_frames.STDOUT, b""),
            (_frames.EXIT, b'{"exit_code": 7}'),
        ]
        assert decoder.pending == 0

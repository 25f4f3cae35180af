"""Six emulated Feetech STS3215 servos behind scservo_sdk's real PortHandler: only the serial port is replaced.

LeRobot's FeetechMotorsBus, scservo_sdk's PacketHandler, GroupSyncRead and GroupSyncWrite all run as they do on an
arm; `EmulatedPortHandler.setupPort` attaches an in-memory line (`ServoLine`) instead of opening a serial device.
The line parses each instruction packet (PING, READ, WRITE, SYNC_READ, SYNC_WRITE) and answers with the status
packets real servos send. A servo with its torque on reaches its goal at once; with the torque off it stays put.
"""

from __future__ import annotations

import scservo_sdk as scs

MODEL_STS3215 = 777
ADDR = {"model": 3, "min": 9, "max": 11, "homing": 31, "torque": 40, "goal": 42, "lock": 55, "present": 56}


def _u16(memory: bytearray, addr: int) -> int:
    return memory[addr] | memory[addr + 1] << 8


class Servo:
    """One servo's control table (256 bytes, little-endian words, as the STS series keeps it)."""

    def __init__(self, servo_id: int, position: int = 2048) -> None:
        self.memory = bytearray(256)
        self.memory[0], self.memory[1], self.memory[5] = 3, 10, servo_id  # firmware 3.10, its ID
        self.memory[ADDR["model"] : ADDR["model"] + 2] = MODEL_STS3215.to_bytes(2, "little")
        self.memory[ADDR["max"] : ADDR["max"] + 2] = (4095).to_bytes(2, "little")
        self.memory[ADDR["present"] : ADDR["present"] + 2] = position.to_bytes(2, "little")
        self.goals: list[int] = []  # every Goal_Position written, in order

    @property
    def torque_on(self) -> bool:
        return self.memory[ADDR["torque"]] == 1

    @property
    def present(self) -> int:
        return _u16(self.memory, ADDR["present"])

    def write(self, addr: int, data: bytes) -> None:
        self.memory[addr : addr + len(data)] = data
        if addr == ADDR["goal"] and len(data) >= 2:
            self.goals.append(_u16(self.memory, addr))
            if self.torque_on:  # a position servo with torque reaches its goal
                self.memory[ADDR["present"] : ADDR["present"] + 2] = data[:2]


def _status(servo_id: int, params: bytes = b"") -> bytes:
    body = bytes([servo_id, len(params) + 2, 0, *params])
    return b"\xff\xff" + body + bytes([~sum(body) & 0xFF])


class ServoLine:
    """The bytes between the host and the servos: what the host writes is parsed, the answers wait to be read."""

    def __init__(self, servos: dict[int, Servo]) -> None:
        self.servos, self.rx, self.is_open = servos, bytearray(), True

    # the pyserial calls PortHandler makes
    def write(self, packet: bytes | list[int]) -> int:
        self._answer(bytes(packet))
        return len(packet)

    def read(self, length: int) -> bytes:
        out, self.rx = bytes(self.rx[:length]), self.rx[length:]
        return out

    @property
    def in_waiting(self) -> int:
        return len(self.rx)

    def flush(self) -> None:
        pass

    def reset_input_buffer(self) -> None:
        self.rx.clear()

    def close(self) -> None:
        self.is_open = False

    def _answer(self, packet: bytes) -> None:
        servo_id, length, instruction = packet[2], packet[3], packet[4]
        params = packet[5 : 3 + length]
        if instruction == scs.INST_SYNC_WRITE:
            addr, size = params[0], params[1]
            for i in range(2, len(params), size + 1):
                self.servos[params[i]].write(addr, params[i + 1 : i + 1 + size])
        elif instruction == scs.INST_SYNC_READ:
            addr, size = params[0], params[1]
            for sid in params[2:]:
                if sid in self.servos:
                    self.rx += _status(sid, bytes(self.servos[sid].memory[addr : addr + size]))
        elif servo_id in self.servos:
            servo = self.servos[servo_id]
            if instruction == scs.INST_PING:
                self.rx += _status(servo_id)
            elif instruction == scs.INST_READ:
                self.rx += _status(servo_id, bytes(servo.memory[params[0] : params[0] + params[1]]))
            elif instruction == scs.INST_WRITE:
                servo.write(params[0], params[1:])
                self.rx += _status(servo_id)


ARMS: dict[str, dict[int, Servo]] = {}  # port name -> its servos; a port not here does not exist


def six_servo_arm(port: str) -> dict[int, Servo]:
    """Plug an SO-101's six servos (IDs 1-6, each at mid-range) into `port`."""
    ARMS[port] = {i: Servo(i) for i in range(1, 7)}
    return ARMS[port]


class EmulatedPortHandler(scs.PortHandler):
    """scservo_sdk's PortHandler with the serial device replaced by the servos plugged into ARMS[port_name]."""

    def setupPort(self, cflag_baud: int) -> bool:  # noqa: N802 (the SDK's name)
        import serial

        if self.port_name not in ARMS:
            raise serial.SerialException(f"[Errno 2] could not open port {self.port_name}: No such file or directory")
        self.ser = ServoLine(ARMS[self.port_name])
        self.is_open = True
        self.tx_time_per_byte = (1000.0 / self.baudrate) * 10.0
        return True

#!/usr/bin/env python3
"""A loopback stand-in for Qualcomm AI Hub, for tests only: it answers the official client's protocol
(protobuf messages of package qai_hub.api, built from the real `qai-hub` package's own
`qai_hub.public_api_pb2`) with scripted scenarios, and records what it received.

    aihub_standin.py --scenario SCENARIO.json --record DIR

prints `PORT <n>` on stdout once it listens on 127.0.0.1 and serves until killed. Everything it
returns is made up by the scenario: it is no device and measures nothing.

The scenario (JSON):
    token        the only token it accepts (`Authorization: token <token>`; else HTTP 401)
    devices      [{name, os, attributes: [..], soc_description}]
    part_size    bytes per multipart upload part (several parts for a small model)
    throttle     {"POST jobs": N}: the first N such requests answer HTTP 429
    profiles     {device name: {times_us: [..], layers: [[name, type, "NPU"|"CPU"|"GPU"], ..],
                  cold_load_us, warm_load_us, peak: [lower, upper], tool_versions: {name: version},
                  running_polls, models: {model name: {any of the above}}} | {fail: {reason, details, type}}}
                 a profile's `models` overrides its fields for the model uploaded under that name
                 (`compare` A vs B on one device: a slower B)
Recorded in DIR: requests.jsonl (one line per request: method, path, query), jobs.jsonl (each
submitted job: id, device, options, is_profiling_on, model_id) and uploads/<model id>.bin (the
bytes of each completed upload, its parts joined as the ETags listed them).
"""

import argparse
import hashlib
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from qai_hub import public_api_pb2 as api

PROTOBUF = "application/x-protobuf"
UNITS = {"CPU": api.COMPUTE_UNIT_CPU, "GPU": api.COMPUTE_UNIT_GPU, "NPU": api.COMPUTE_UNIT_NPU}
DELEGATES = {"CPU": ("", ""), "GPU": ("QNN", "GPU"), "NPU": ("QNN", "HTP")}


class State:
    def __init__(self, scenario, record):
        self.scenario = scenario
        self.record = record
        self.lock = threading.Lock()
        self.models = {}  # id -> {name, type, complete, parts}
        self.jobs = {}  # id -> {device, polls, model_id, options}
        self.throttle = dict(scenario.get("throttle", {}))
        os.makedirs(os.path.join(record, "uploads"), exist_ok=True)

    def log(self, name, entry):
        with self.lock, open(os.path.join(self.record, name), "a") as f:
            f.write(json.dumps(entry) + "\n")

    def next_id(self, prefix, table):
        return f"{prefix}{len(table) + 1:04d}"


def profile_detail(spec):
    detail = api.ProfileDetail()
    times = spec["times_us"]
    detail.all_execution_times.extend(times)
    detail.execution_time = min(times)
    detail.cold_load_time = spec.get("cold_load_us", 200000)
    detail.warm_load_time = spec.get("warm_load_us", 80000)
    detail.all_cold_load_times.append(detail.cold_load_time)
    detail.all_warm_load_times.append(detail.warm_load_time)
    lower, upper = spec.get("peak", [1 << 20, 4 << 20])
    detail.execution_memory.peak.lower = lower
    detail.execution_memory.peak.upper = upper
    detail.execution_memory.increase.lower = 0
    detail.execution_memory.increase.upper = upper // 2
    detail.after_execution_peak_memory = upper
    detail.major_version = 1
    segment, last_unit = -1, None
    for index, (name, kind, unit) in enumerate(spec["layers"]):
        if unit != last_unit:
            segment, last_unit = segment + 1, unit
            delegate, extra = DELEGATES[unit]
            detail.segment_details.add(id=f"segment-{segment}", compute_unit=UNITS[unit], delegate_name=delegate,
                                       delegate_extra_info=extra, execution_time=100)
        delegate, extra = DELEGATES[unit]
        detail.layer_details.add(name=name, layer_type_name=kind, compute_unit=UNITS[unit], id=str(index),
                                 delegate_name=delegate, delegate_extra_info=extra, execution_time=10,
                                 segment_id=f"segment-{segment}")
    for name, version in spec.get("tool_versions", {}).items():
        detail.tool_versions.add(name=name, version=version)
    return detail


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State = None

    def log_message(self, *args):
        pass

    def reply(self, status, message=None, text=None, headers=None):
        body = message.SerializeToString() if message is not None else (text or "").encode()
        self.send_response(status)
        self.send_header("Content-Type", PROTOBUF if message is not None else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def handle_any(self, method):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        raw = self.body()
        state = self.state
        state.log("requests.jsonl", {"method": method, "path": url.path, "query": query})
        part = re.fullmatch(r"/upload/([^/]+)/([^/]+)/(\d+)", url.path)
        if method == "PUT" and part:
            return self.put_part(part.group(1), int(part.group(3)), raw)
        if self.headers.get("Authorization") != f"token {state.scenario['token']}":
            return self.reply(401, text='{"detail":"Invalid token."}')
        path = url.path.removeprefix("/api/v1/").strip("/")
        key = f"{method} {re.sub(r'/.*', '', path) if method != 'POST' else path}"
        with state.lock:
            throttled = state.throttle.get(key, 0) > 0
            if throttled:
                state.throttle[key] -= 1
        if throttled:
            return self.reply(429, text="Too Many Requests", headers={"Retry-After": "0"})
        routes = [
            ("GET", r"devices", self.devices),
            ("GET", r"users/auth/user", self.user),
            ("POST", r"models", self.create_model),
            ("GET", r"models/([^/]+)", self.get_model),
            ("GET", r"models/([^/]+)/multipart_upload", self.upload_urls),
            ("POST", r"models/([^/]+)/multipart_upload", self.complete_upload),
            ("POST", r"jobs", self.create_job),
            ("GET", r"jobs/([^/]+)", self.get_job),
            ("GET", r"jobs/([^/]+)/result", self.get_result),
        ]
        for verb, pattern, handler in routes:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                return handler(*match.groups(), query=query, raw=raw)
        return self.reply(404, text=f"no route {method} {url.path}")

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def devices(self, query, raw):
        reply = api.DeviceList()
        name = (query.get("name") or [""])[0]
        wanted = query.get("attributes") or []
        for spec in self.state.scenario["devices"]:
            if name and spec["name"] != name:
                continue
            if not all(a in spec["attributes"] for a in wanted):
                continue
            reply.devices.add(name=spec["name"], os=spec["os"], attributes=spec["attributes"],
                              soc_description=spec.get("soc_description", ""))
        if (query.get("select") or ["False"])[0].lower() == "true":
            del reply.devices[1:]
        reply.total_query_count = len(reply.devices)
        return self.reply(200, reply)

    def user(self, query, raw):
        return self.reply(200, api.User(id=1, first_name="Stand", last_name="In", email="standin@example.org"))

    def create_model(self, query, raw):
        model = api.Model.FromString(raw)
        state = self.state
        with state.lock:
            model_id = state.next_id("m", state.models)
            state.models[model_id] = {"name": model.name, "type": model.model_type, "complete": False, "parts": {}}
        return self.reply(201, api.CreateUpdateResponse(id=model_id))

    def model_pb(self, model_id):
        model = self.state.models[model_id]
        return api.Model(model_id=model_id, name=model["name"], model_type=model["type"],
                         file_upload_complete=model["complete"])

    def get_model(self, model_id, query, raw):
        if model_id not in self.state.models:
            return self.reply(404, text="no such model")
        return self.reply(200, self.model_pb(model_id))

    def upload_urls(self, model_id, query, raw):
        size = int(query["file_size"][0])
        part = int(self.state.scenario.get("part_size", 1 << 20))
        count = max(1, -(-size // part))
        host = f"http://{self.headers['Host']}"
        reply = api.FileUploadResponse()
        reply.multipart_url.upload_id = f"u-{model_id}"
        reply.multipart_url.max_part_size = part
        reply.multipart_url.urls.extend(f"{host}/upload/{model_id}/u-{model_id}/{i}" for i in range(count))
        return self.reply(200, reply)

    def put_part(self, model_id, index, raw):
        etag = f'"{hashlib.md5(raw).hexdigest()}"'
        with self.state.lock:
            self.state.models[model_id]["parts"][etag] = raw
        return self.reply(200, text="", headers={"ETag": etag})

    def complete_upload(self, model_id, query, raw):
        done = api.FileMultipartUploadComplete.FromString(raw)
        model = self.state.models[model_id]
        missing = [etag for etag in done.etags if etag not in model["parts"]]
        if missing or done.upload_id != f"u-{model_id}":
            return self.reply(400, text=f"unknown parts {missing} or upload {done.upload_id}")
        with open(os.path.join(self.state.record, "uploads", f"{model_id}.bin"), "wb") as f:
            f.write(b"".join(model["parts"][etag] for etag in done.etags))
        model["complete"] = True
        return self.reply(200, api.CreateUpdateResponse(id=model_id))

    def create_job(self, query, raw):
        job = api.Job.FromString(raw)
        inference = job.inference_job
        state = self.state
        if inference.model.model_id not in state.models or not state.models[inference.model.model_id]["complete"]:
            return self.reply(400, text="model not uploaded")
        with state.lock:
            job_id = state.next_id("j", state.jobs)
            state.jobs[job_id] = {"device": inference.device, "polls": 0, "model_id": inference.model.model_id,
                                  "options": inference.options, "name": inference.name,
                                  "profiling": inference.is_profiling_on}
        state.log("jobs.jsonl", {"id": job_id, "device": inference.device.name, "options": inference.options,
                                 "is_profiling_on": inference.is_profiling_on, "model_id": inference.model.model_id})
        return self.reply(201, api.CreateUpdateResponse(id=job_id))

    def profile_spec(self, job):
        spec = self.state.scenario["profiles"][job["device"].name]
        model_name = self.state.models[job["model_id"]]["name"]
        return {**spec, **spec.get("models", {}).get(model_name, {})}

    def job_pb(self, job_id):
        job = self.state.jobs[job_id]
        spec = self.profile_spec(job)
        reply = api.Job(hub_version="standin")
        inference = reply.inference_job
        inference.inference_job_id = job_id
        inference.device.CopyFrom(job["device"])
        inference.model.CopyFrom(self.model_pb(job["model_id"]))
        inference.name = job["name"]
        inference.options = job["options"]
        inference.is_profiling_on = job["profiling"]
        if job["polls"] <= spec.get("running_polls", 1):
            inference.job_state = api.JOB_STATE_MEASURING_PERFORMANCE
        elif "fail" in spec:
            inference.job_state = api.JOB_STATE_FAILED
            inference.failure_reason = spec["fail"]["reason"]
            inference.error_details = spec["fail"].get("details", "")
            reply.failure_type = api.JobFailureType.Value("JOB_FAILURE_TYPE_" + spec["fail"]["type"])
        else:
            inference.job_state = api.JOB_STATE_DONE
            inference.execution_time = min(spec["times_us"])
        return reply

    def get_job(self, job_id, query, raw):
        if job_id not in self.state.jobs:
            return self.reply(404, text="no such job")
        with self.state.lock:
            self.state.jobs[job_id]["polls"] += 1
        return self.reply(200, self.job_pb(job_id))

    def get_result(self, job_id, query, raw):
        job = self.state.jobs.get(job_id)
        spec = job and self.profile_spec(job)
        if not job or "fail" in spec or job["polls"] <= spec.get("running_polls", 1):
            return self.reply(404, text="no result")
        reply = api.JobResult()
        reply.inference_job_result.inference_job_id = job_id
        reply.inference_job_result.detail.CopyFrom(profile_detail(spec))
        return self.reply(200, reply)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--record", required=True)
    args = parser.parse_args()
    with open(args.scenario) as f:
        Handler.state = State(json.load(f), args.record)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())

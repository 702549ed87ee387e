// daotai web console: a director's desk in the browser.
// Plain modern JavaScript, no build step; talks only to the service's public HTTP API.
//
// The editor keeps the script exactly as the director wrote it (aliases such as 推 or MS,
// shorthand such as "camera": "pan", key aliases such as 对白) and shows every value in its
// canonical form; an edit writes the canonical value, so an untouched word exports unchanged.
// The forms are generated from the JSON Schema the server exports (GET /v1/schema), so a field
// the script gains appears here without a change to this file.
"use strict";

const I18N = {
  en: {
    app_title: "daotai · director's desk", example: "Example", load_example: "Load example",
    import: "Import JSON", export: "Export JSON", undo: "Undo", redo: "Redo",
    script: "Script", scene: "Scene", characters: "Characters", shots: "Shots", run: "Run",
    add_character: "Add character", add_shot: "Add shot", backend: "Backend", preset: "Preset",
    submit: "Render", queue: "Queue", delete: "Delete", duplicate: "Duplicate", preview: "Quick preview",
    script_size: "script's own size",
    valid: "Script is valid and the plan is ready", invalid_one: "1 problem", invalid: "{n} problems", checking: "Checking…",
    server_down: "Cannot reach the server", from_plan: "planner", from_script: "script",
    reason_problems: "Render is off until the problems listed at the top are fixed.",
    reason_checking: "Render waits until the script has been checked.",
    reason_down: "Render is off: the server does not answer.",
    saved_preset: "Saved settings", preset_name: "Save as", save_preset: "Save settings",
    saved_preset_bad: "A name is 1 to 40 lower-case letters, digits, - or _.",
    plan_all: "All {n} shots will render.", plan_some: "{r} of {n} shots will render; {u} unchanged, reused from earlier renders.",
    plan_none: "Nothing changed: all {n} shots are reused from earlier renders.", will_render: "renders", will_reuse: "reused",
    status_queued: "queued", status_in_progress: "rendering",
    status_completed: "done", status_failed: "failed", status_cancelled: "cancelled", cancel: "Cancel",
    sequence: "Sequence", clips: "Shot clips", contact_sheet: "Contact sheet", qc: "Quality report",
    downloads: "Downloads", qc_passed: "All checks passed", qc_failed: "Some checks failed",
    cam_ok: "the camera moved as planned", cam_bad: "the camera did not follow the plan",
    cam_error: "off by {e} px per frame on average", preview_running: "Rendering preview… {p}%",
    live: "So far", live_frame: "the frame being rendered", live_caption: "rendering {s}, frame {f}",
    live_caption_denoise: "denoising {s}, step {k}/{n} (a sketch from the latents)",
    none: "(none)", default: "default", drag: "Drag to reorder",
    reference_images: "Reference images", upload_image: "Upload image", drop_here: "or drop PNG / JPEG / WebP here",
    remove: "Remove", uploading: "Uploading {name}…", upload_sound: "Upload sound", upload_video: "Upload video", reference_n: "Reference image {n}",
    add_item: "Add", everyone: "every character (default)", unknown_character: "{w} (no such character)",
    group_transition: "Transition", group_blocking: "Blocking", group_sound: "Sound", group_footage: "Reference footage", group_more: "More",
    stage: "Floor plan", diagram: "Top-down floor plan",
    stage_help: "Drag a character, its facing tick, a waypoint or the camera's end mark; double-click the floor to add a waypoint. Keys on a mark: arrows move 0.1 m (Shift 0.5 m), Q / E turn 15°.",
    h_char: "{id}: x {x} m, z {z} m, facing {f}°. Arrows move, Q and E turn.",
    h_facing: "{id} facing {f}°. Arrows or Q and E turn.",
    h_way: "{id} walks to x {x} m, z {z} m. Arrows move.",
    h_camend: "Camera at the end of the move: x {x} m, z {z} m. Arrows move.",
    h_orbit: "Camera orbit, {a}°. Arrows move the end of the orbit.",
    h_aim: "Camera pan, {a}°. Arrows turn.",
    line_180: "180° line",
    whole_render: "Whole render", per_shot: "Per shot", shot: "Shot",
    kind_sequence: "sequence", kind_shot: "shot video", kind_depth: "depth (16-bit)", kind_depth_preview: "depth preview",
    kind_mask: "character mask", kind_control_index: "control index", kind_plan: "plan", kind_qc: "quality report",
    kind_manifest: "manifest", kind_contact_sheet: "contact sheet", kind_timeline: "timeline (OTIO)",
    kind_edl: "EDL", kind_fcpxml: "FCP XML", kind_thumbnail: "thumbnail", kind_spritesheet: "sprite sheet",
    kind_srt: "subtitles (SRT)", kind_vtt: "subtitles (WebVTT)", kind_shot_srt: "subtitles (SRT)", kind_shot_vtt: "subtitles (WebVTT)",
    kind_boards: "storyboard pages (PDF)", kind_board_page: "storyboard page (PNG)", subtitles: "Dialogue",
    open_full: "Open full size", close: "Close", open_tab: "Open in a new tab",
    check_file: "File", check_format: "Format", check_picture: "Picture", check_camera: "Camera move",
    check_fidelity: "Encode fidelity", check_sound: "Sound", check_identity: "Character look", check_other: "Other",
    identity_scores: "Character looks across shots (largest difference, {max} at most)", identity_one_shot: "in one shot",
    ok_format: "{w}×{h}, {fps} fps, {n} frames as planned", ok_picture: "no black, green or frozen frames",
    ok_fidelity: "PSNR {db} dB", ok_sound: "sound as planned", verdict_ok: "passed", verdict_bad: "failed",
    sequence_check: "Sequence",
    boards: "Storyboard pages", boards_print: "Print / save as PDF", boards_per_page: "Shots per page",
    boards_loading: "Preparing the boards…", boards_png: "Download PNG", boards_png_n: "PNG page {n}", board_page: "page {n} of {m}", dialogue_none: "",
    move_static: "static", move_pan: "pan {d}", move_tilt: "tilt {d}", move_roll: "roll {d}", move_dolly: "dolly {d}",
    move_truck: "truck {d}", move_pedestal: "pedestal {d}", move_crane: "crane {d}", move_orbit: "orbit {a}°",
    move_zoom: "zoom {d} {a}→{b}°", move_dolly_zoom: "dolly zoom {d}", move_handheld: "handheld ±{a}°", move_follow: "follow",
    transition_in: "in: {t}",
  },
  zh: {
    app_title: "导演台 · daotai", example: "示例", load_example: "载入示例",
    import: "导入 JSON", export: "导出 JSON", undo: "撤销", redo: "重做",
    script: "剧本", scene: "场景", characters: "角色", shots: "镜头", run: "渲染",
    add_character: "添加角色", add_shot: "添加镜头", backend: "后端", preset: "预设",
    submit: "开始渲染", queue: "队列", delete: "删除", duplicate: "复制", preview: "快速预览",
    script_size: "剧本自身尺寸",
    valid: "剧本有效，分镜规划就绪", invalid_one: "1 处问题", invalid: "{n} 处问题", checking: "检查中…",
    server_down: "无法连接服务器", from_plan: "规划", from_script: "剧本",
    reason_problems: "请先修正顶部列出的问题，才能渲染。",
    reason_checking: "剧本检查完成后才能渲染。",
    reason_down: "服务器无响应，暂不能渲染。",
    saved_preset: "已存设置", preset_name: "另存为", save_preset: "保存设置",
    saved_preset_bad: "名称为 1 到 40 个小写字母、数字、- 或 _。",
    plan_all: "全部 {n} 个镜头都将渲染。", plan_some: "{n} 个镜头中 {r} 个将渲染；{u} 个未改动，沿用之前的渲染。",
    plan_none: "没有改动：{n} 个镜头全部沿用之前的渲染。", will_render: "将渲染", will_reuse: "沿用",
    status_queued: "排队中", status_in_progress: "渲染中",
    status_completed: "完成", status_failed: "失败", status_cancelled: "已取消", cancel: "取消",
    sequence: "成片", clips: "分镜片段", contact_sheet: "联系表", qc: "质检报告",
    downloads: "下载", qc_passed: "全部检查通过", qc_failed: "部分检查未通过",
    cam_ok: "摄像机按计划运动", cam_bad: "摄像机未按计划运动",
    cam_error: "平均每帧偏差 {e} 像素", preview_running: "正在渲染预览… {p}%",
    live: "已完成的部分", live_frame: "正在渲染的画面", live_caption: "正在渲染 {s}，第 {f} 帧",
    live_caption_denoise: "正在去噪 {s}，第 {k}/{n} 步（由潜变量估出的草图）",
    none: "（无）", default: "默认", drag: "拖动以排序",
    reference_images: "参考图", upload_image: "上传图片", drop_here: "或将 PNG / JPEG / WebP 拖放到此处",
    remove: "移除", uploading: "正在上传 {name}…", upload_sound: "上传音频", upload_video: "上传视频", reference_n: "参考图 {n}",
    add_item: "添加", everyone: "全部角色（默认）", unknown_character: "{w}（无此角色）",
    group_transition: "转场", group_blocking: "走位", group_sound: "声音", group_footage: "参考视频", group_more: "更多",
    stage: "平面图", diagram: "俯视平面图",
    stage_help: "拖动角色、朝向标记、走位点或机位终点；双击地面添加走位点。选中标记后：方向键移动 0.1 米（Shift 0.5 米），Q / E 转 15°。",
    h_char: "{id}：x {x} 米，z {z} 米，朝向 {f}°。方向键移动，Q、E 转向。",
    h_facing: "{id} 朝向 {f}°。方向键或 Q、E 转向。",
    h_way: "{id} 走到 x {x} 米，z {z} 米。方向键移动。",
    h_camend: "运镜终点机位：x {x} 米，z {z} 米。方向键移动。",
    h_orbit: "环绕 {a}°。方向键移动环绕终点。",
    h_aim: "摇镜 {a}°。方向键转动。",
    line_180: "180° 轴线",
    whole_render: "整体", per_shot: "逐镜头", shot: "镜头",
    kind_sequence: "成片", kind_shot: "镜头视频", kind_depth: "深度（16 位）", kind_depth_preview: "深度预览",
    kind_mask: "角色遮罩", kind_control_index: "控制索引", kind_plan: "规划", kind_qc: "质检报告",
    kind_manifest: "清单", kind_contact_sheet: "联系表", kind_timeline: "时间线（OTIO）",
    kind_edl: "EDL", kind_fcpxml: "FCP XML", kind_thumbnail: "缩略图", kind_spritesheet: "拼图",
    kind_srt: "字幕（SRT）", kind_vtt: "字幕（WebVTT）", kind_shot_srt: "字幕（SRT）", kind_shot_vtt: "字幕（WebVTT）",
    kind_boards: "故事板页（PDF）", kind_board_page: "故事板页（PNG）", subtitles: "对白",
    open_full: "查看原尺寸", close: "关闭", open_tab: "在新标签页打开",
    check_file: "文件", check_format: "格式", check_picture: "画面", check_camera: "运镜",
    check_fidelity: "编码保真度", check_sound: "声音", check_identity: "角色外观", check_other: "其他",
    identity_scores: "角色在各镜头间的外观（最大差异，上限 {max}）", identity_one_shot: "仅一个镜头",
    ok_format: "{w}×{h}，{fps} 帧/秒，{n} 帧，与规划一致", ok_picture: "无黑帧、绿帧或冻结画面",
    ok_fidelity: "PSNR {db} dB", ok_sound: "声音与规划一致", verdict_ok: "通过", verdict_bad: "未通过",
    sequence_check: "成片",
    boards: "故事板页", boards_print: "打印 / 存为 PDF", boards_per_page: "每页镜头数",
    boards_loading: "正在准备故事板…", boards_png: "下载 PNG", boards_png_n: "PNG 第 {n} 页", board_page: "第 {n} / {m} 页", dialogue_none: "",
    move_static: "固定", move_pan: "摇 {d}", move_tilt: "俯仰摇 {d}", move_roll: "滚转 {d}", move_dolly: "推拉 {d}",
    move_truck: "横移 {d}", move_pedestal: "升降 {d}", move_crane: "摇臂 {d}", move_orbit: "环绕 {a}°",
    move_zoom: "变焦 {d} {a}→{b}°", move_dolly_zoom: "希区柯克变焦 {d}", move_handheld: "手持 ±{a}°", move_follow: "跟拍",
    transition_in: "转入：{t}",
  },
};

// Field labels, by "Model.field" or by field name (a field without one shows the schema's title).
const FIELD_LABELS = {
  en: {
    version: "Version", title: "Title", fps: "Frames per second", "Script.size": "Size (WxH)", seed: "Seed",
    soundtrack: "Soundtrack", "Scene.name": "Scene name", description: "Description", time_of_day: "Time of day",
    palette: "Palette", set_pieces: "Set pieces", "Character.id": "ID", name: "Name", appearance: "Appearance",
    colour: "Colour", height: "Height (m)", position: "Position (m)", facing: "Facing (°)",
    reference_images: "Reference images", shot_id: "Shot ID", duration: "Duration (s)", subject: "Subject",
    framing: "Framing", angle: "Angle", camera: "Camera", "Shot.characters": "Characters in the shot",
    action: "Action", prompt: "Prompt", negative_prompt: "Negative prompt", transition: "Transition",
    blocking: "Blocking", dialogue: "Dialogue", sound: "Sound (words)", audio: "Shot audio",
    "CameraSpec.type": "Camera move", direction: "Direction", motion: "Motion (m)", rotate: "Rotate (°)",
    orbit: "Orbit (°)", fov: "Field of view (°)", fov_end: "Field of view at end (°)", easing: "Easing",
    shake: "Shake (°)", "Transition.type": "Transition", "Transition.duration": "Transition (s)",
    "BlockingMove.character": "Who", to: "Walks to (m)", start: "From (s)", end: "Until (s)",
    "BlockingMove.facing": "Facing on arrival (°)", "DialogueLine.character": "Speaker", line: "Line",
    language: "Language", mute: "Mute", gain_db: "Gain (dB)", path: "File", offset: "Offset (s)",
    "SetPiece.kind": "Kind", "SetPiece.size": "Size (m)", yaw: "Yaw (°)",
  },
  zh: {
    version: "版本", title: "标题", fps: "帧率", "Script.size": "尺寸（宽x高）", seed: "随机种子",
    soundtrack: "配乐", "Scene.name": "场景名", description: "描述", time_of_day: "时间",
    palette: "色板", set_pieces: "布景", "Character.id": "编号", name: "名字", appearance: "外貌",
    colour: "颜色", height: "身高（米）", position: "位置（米）", facing: "朝向（°）",
    reference_images: "参考图", shot_id: "镜头编号", duration: "时长（秒）", subject: "主体",
    framing: "景别", angle: "角度", camera: "摄像机", "Shot.characters": "出场角色",
    action: "动作", prompt: "提示词", negative_prompt: "反向提示词", transition: "转场",
    blocking: "走位", dialogue: "对白", sound: "音效（文字）", audio: "镜头声音",
    "CameraSpec.type": "运镜", direction: "方向", motion: "位移（米）", rotate: "旋转（°）",
    orbit: "环绕（°）", fov: "视场角（°）", fov_end: "结束视场角（°）", easing: "缓动",
    shake: "抖动（°）", "Transition.type": "转场", "Transition.duration": "转场时长（秒）",
    "BlockingMove.character": "角色", to: "走到（米）", start: "开始（秒）", end: "结束（秒）",
    "BlockingMove.facing": "到达朝向（°）", "DialogueLine.character": "说话人", line: "台词",
    language: "语言", mute: "静音", gain_db: "增益（dB）", path: "文件", offset: "偏移（秒）",
    "SetPiece.kind": "类型", "SetPiece.size": "尺寸（米）", yaw: "偏航（°）",
  },
};

// The names of a vector's components, by field name and length.
const AXES = {
  motion: ["x", "y", "z"], position: ["x", "z"], position3: ["x", "y", "z"], to: ["x", "z"], size: ["w", "h", "d"],
  rotate: { en: ["pan", "tilt", "roll"], zh: ["摇", "俯仰", "滚转"] },
};

// Chinese labels for the canonical vocabulary (the values sent are always the canonical names).
const VOCAB_ZH = {
  extreme_close_up: "大特写", close_up: "特写", medium_close_up: "近景", medium: "中景",
  medium_full: "中全景", full: "全景", wide: "远景", extreme_wide: "大远景",
  over_the_shoulder: "过肩", two_shot: "双人镜头", pov: "主观镜头", insert: "插入镜头",
  eye_level: "平视", high: "俯拍", low: "仰拍", birds_eye: "鸟瞰", worms_eye: "虫视", dutch: "荷兰角",
  static: "固定", pan: "摇", tilt: "俯仰摇", roll: "滚转", dolly: "推拉", truck: "横移", pedestal: "升降",
  crane: "摇臂", orbit: "环绕", zoom: "变焦", dolly_zoom: "希区柯克变焦", handheld: "手持", follow: "跟拍", steadicam: "斯坦尼康",
  dawn: "黎明", morning: "早晨", day: "白天", afternoon: "下午", dusk: "黄昏", night: "夜晚", interior: "室内",
  linear: "匀速", ease_in: "缓入", ease_out: "缓出", ease_in_out: "缓入缓出",
  cut: "切", crossfade: "叠化", fade: "淡入淡出",
  wipe_left: "向左划像", wipe_right: "向右划像", wipe_up: "向上划像", wipe_down: "向下划像",
  left: "左", right: "右", up: "上", down: "下", in: "进", out: "出",
  box: "方块", cylinder: "圆柱", sphere: "球",
};

// Shorthand a script may use for an object: "camera": "推" means {"type": "推"}.
const SHORTHAND = { camera: "type", transition: "type", scene: "name", soundtrack: "path", reference_video: "path" };

// How each model's fields are laid out: rows of fields, and groups that fold away when unused.
// Fields the schema has and this table does not name are still shown (in the `rest` group,
// else in a last row), so a field the script gains needs no change here.
const LAYOUT = {
  Script: [{ props: ["title", "fps", "size", "seed", "version"] }, { key: "sound", props: ["soundtrack"], fold: true }],
  Scene: [{ props: ["name", "time_of_day"] }, { props: ["description"] }, { key: "more", props: ["palette", "set_pieces"], fold: true, rest: true }],
  Character: [{ props: ["id", "name", "colour", "height", "position", "facing", "seed"] }, { props: ["appearance", "reference_images"] }],
  Shot: [
    { props: ["shot_id", "duration", "subject", "framing", "angle"] },
    { props: ["camera"] },
    { props: ["action", "prompt"] },
    { key: "transition", props: ["transition"], fold: true },
    { key: "blocking", props: ["blocking"], fold: true },
    { key: "sound", props: ["dialogue", "sound", "audio"], fold: true },
    { key: "footage", props: ["reference_video"], fold: true },
    { key: "more", props: ["negative_prompt", "characters", "seed"], fold: true, rest: true },
  ],
  CameraSpec: [{ props: ["type", "direction", "easing", "fov", "fov_end"] }, { props: ["motion", "rotate", "orbit", "shake"] }],
  BlockingMove: [{ props: ["character", "to", "start", "end", "facing"] }],
  DialogueLine: [{ props: ["character", "line", "language"] }],
};

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const PALETTE = ["#3366cc", "#cc3333", "#339966", "#cc9933", "#9933cc", "#33a3cc"];
const ID_FIELDS = new Set(["Character.id", "Shot.shot_id"]);
// Moves whose end mark on the floor plan edits camera.motion, orbit or the pan angle.
const MOTION_MOVES = new Set(["dolly", "truck", "pedestal", "crane", "dolly_zoom"]);

const state = {
  script: { title: "Untitled", shots: [{ shot_id: "s01", duration: 2 }] },
  lang: localStorage.getItem("daotai.lang") === "zh" ? "zh" : "en",
  schema: null, aliases: {}, presets: {}, keyAliases: {},
  backends: ["previz"], sizePresets: ["preview", "draft", "final"],
  undo: [], redo: [], lastPush: 0, issues: [], check: "checking", diagrams: {}, jobs: {}, previews: {},
  reading: null, // the service's canonical reading of the script (POST /v1/schema/read), for words the tables do not read
  wantsReading: false, // the editor showed a word it could not read; draw again when the reading comes
  refStatus: {}, // character id → {text, kind} of its latest upload
  openGroups: new Set(), // fold groups the director opened by hand
  drag: null, // the floor-plan drag in progress
  lastCharacter: {}, // shot id → the character last moved on its floor plan (a double-click adds its waypoint)
};

const UPLOAD_REF = /^upload:(img_[0-9a-f]{32})$/;
const REFERENCE_TYPES = ["image/png", "image/jpeg", "image/webp"];

// ------------------------------------------------------------------ small helpers

/** Translate a UI key in the current language, filling {name} slots. */
function t(key, vars = {}) {
  const text = (I18N[state.lang] && I18N[state.lang][key]) ?? I18N.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? ""));
}

/** The label of a vocabulary value: canonical name, plus Chinese in Chinese mode. */
function vocabLabel(value) {
  const plain = String(value).replace(/_/g, " ");
  const zh = VOCAB_ZH[value] || chineseAlias(value);
  return state.lang === "zh" && zh ? `${zh} · ${plain}` : plain;
}

/** A vocabulary value in running text: the Chinese word alone in Chinese mode, else the canonical name spaced. */
function plainLabel(value) {
  return (state.lang === "zh" && (VOCAB_ZH[value] || chineseAlias(value))) || String(value).replace(/_/g, " ");
}

/** A value the table above does not name (the vocabulary grew): its first Chinese alias on the server. */
let chineseAliases = null;
function chineseAlias(value) {
  if (!chineseAliases) {
    chineseAliases = {};
    for (const table of Object.values(state.aliases)) {
      for (const [word, canonicalValue] of Object.entries(table)) {
        if (/[\u4e00-\u9fff]/.test(word) && !(canonicalValue in chineseAliases)) chineseAliases[canonicalValue] = word;
      }
    }
  }
  return chineseAliases[value];
}

/** Create an element with attributes and children (strings become text nodes, never HTML). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k in node && k !== "list") node[k] = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Split a JSON path like `shots[2].camera.fov` into keys ["shots", 2, "camera", "fov"]. */
function splitPath(path) {
  const keys = [];
  path.replace(/\[(\d+)\]|([^.[\]]+)/g, (_, index, name) => { keys.push(index !== undefined ? Number(index) : name); });
  return keys;
}

function joinPath(keys) {
  return keys.map((k) => (typeof k === "number" ? `[${k}]` : `.${k}`)).join("").replace(/^\./, "");
}

/** The model ($defs name) one step down a path from model `def` (a list of X is "[]X"), or null. */
function stepDef(def, key) {
  if (!def) return null;
  if (def.startsWith("[]")) return typeof key === "number" ? def.slice(2) : null;
  const prop = ((modelSchema(def) || {}).properties || {})[key];
  if (!prop) return null;
  for (const option of prop.anyOf || [prop]) {
    if (refName(option) && schemaDef(refName(option))?.type === "object") return refName(option);
    if (option.type === "array" && option.items && refName(option.items)) return `[]${refName(option.items)}`;
  }
  return null;
}

/** The key a field of model `def` is stored under in `node`: its own name, or another name the script wrote it as. */
function storedKey(node, key, def) {
  if (typeof key === "number" || !node || typeof node !== "object" || key in node) return key;
  for (const alias of ((state.keyAliases[def] || {})[key]) || []) if (alias in node) return alias;
  return key;
}

/** Read a JSON path of the script as written (shorthand strings and other field names understood). */
function readPath(obj, path) {
  let node = obj;
  let parent = null;
  let def = "Script";
  for (const key of splitPath(path)) {
    if (node === undefined || node === null) return undefined;
    if (typeof node !== "object") return typeof node === "string" && SHORTHAND[parent] === key ? node : undefined;
    node = node[storedKey(node, key, def)];
    parent = key;
    def = stepDef(def, key);
  }
  return node;
}

/** Write a JSON path (undefined deletes it); shorthand is expanded only where an edit needs it. */
function writePath(obj, path, value) {
  const keys = splitPath(path);
  const trail = [obj];
  const defs = ["Script"];
  let node = obj;
  for (let i = 0; i < keys.length - 1; i += 1) {
    const key = storedKey(node, keys[i], defs[i]);
    let next = node[key];
    if (typeof next === "string" && SHORTHAND[keys[i]]) next = { [SHORTHAND[keys[i]]]: next };
    else if (next === undefined || next === null || typeof next !== "object") {
      if (value === undefined) return;
      next = typeof keys[i + 1] === "number" ? [] : {};
    }
    node[key] = next;
    node = next;
    trail.push(node);
    defs.push(stepDef(defs[i], keys[i]));
  }
  const last = storedKey(node, keys[keys.length - 1], defs[keys.length - 1]);
  if (value !== undefined) { node[last] = value; return; }
  if (Array.isArray(node)) return;
  delete node[last];
  // An optional object left empty goes too (its defaults apply), never an item of a list.
  for (let i = keys.length - 2; i >= 0; i -= 1) {
    const holder = trail[i];
    const key = storedKey(holder, keys[i], defs[i]);
    const child = holder[key];
    if (typeof keys[i] === "number" || Array.isArray(child) || !child || Object.keys(child).length) break;
    delete holder[key];
  }
}

/** Fold a word the way the server does before looking it up (see /v1/schema `word_folding`). */
function foldWord(text) {
  let folded = String(text).trim().toLowerCase().replace(/['’]/g, "").replace(/[ .-]/g, "_");
  while (folded.includes("__")) folded = folded.replace(/__/g, "_");
  return folded;
}

/** The canonical value of a word for an enum of the schema (`def`), or null when unknown. */
function canonical(def, word) {
  if (typeof word !== "string") return null;
  const choices = schemaDef(def)?.enum || [];
  if (choices.includes(word)) return word;
  const table = state.aliases[def] || {};
  return table[foldWord(word)] ?? null;
}

/** The fields a camera alias also sets (推 is a dolly *in*). */
function cameraPreset(word) {
  return (state.presets.CameraType || {})[foldWord(word || "")] || {};
}

/** Debounce: run `fn` once `ms` after the last call. */
function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

async function api(method, url, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json() : await response.text();
  return { ok: response.ok, status: response.status, data };
}

const round2 = (v) => Math.round(v * 100) / 100;
const fmt = (v) => (Number.isFinite(v) ? round2(v).toFixed(2) : "?");

// ------------------------------------------------------------------ schema reading

function schemaDef(name) {
  return state.schema && state.schema.$defs ? state.schema.$defs[name] : null;
}

function refName(node) {
  return node && node.$ref ? node.$ref.split("/").pop() : null;
}

function modelSchema(def) {
  return def === "Script" ? state.schema : schemaDef(def);
}

/** The properties of a model, without the alias spellings the schema also lists. */
function modelProps(def) {
  const props = (modelSchema(def) || {}).properties || {};
  const aliases = new Set(Object.values(state.keyAliases[def] || {}).flat());
  return Object.entries(props).filter(([name]) => !aliases.has(name));
}

/** What a field needs: kind (enum, number, text, vector, object, list …) and its limits. */
function fieldSpec(def, name, prop, raw) {
  const options = prop.anyOf ? prop.anyOf.filter((o) => o.type !== "null") : [prop];
  const nullable = !!prop.anyOf && options.length < prop.anyOf.length;
  const required = ((modelSchema(def) || {}).required || []).includes(name);
  const base = { def, name, key: `${def}.${name}`, prop, nullable, required, dflt: prop.default, description: prop.description || "" };
  if (name === "colour") return { ...base, kind: "colour" };
  if (name === "palette") return { ...base, kind: "colours" };
  if (name === "reference_images" && def === "Character") return { ...base, kind: "refs" };
  if (name === "size" && def === "Script") return { ...base, kind: "size" };
  if (name === "path" && def === "Soundtrack") return { ...base, kind: "soundfile" };
  if (name === "path" && def === "ReferenceVideo") return { ...base, kind: "videofile" };
  if ((name === "subject" || name === "character") && !prop.items) return { ...base, kind: "charref" };
  const fits = (o) => {
    const target = refName(o) ? schemaDef(refName(o)) : o;
    if (Array.isArray(raw)) return target.type === "array" && (!target.prefixItems || target.prefixItems.length === raw.length);
    return false;
  };
  const node = options.find((o) => refName(o) && schemaDef(refName(o))?.type === "object") || options.find(fits) || options[0] || {};
  const ref = refName(node);
  const target = ref ? schemaDef(ref) : node;
  if (target.enum) return { ...base, kind: "enum", enumDef: ref, choices: target.enum };
  if (target.type === "object") return { ...base, kind: "object", objectDef: ref };
  if (target.type === "boolean") return { ...base, kind: "bool" };
  if (target.type === "number" || target.type === "integer") {
    return { ...base, kind: "number", min: target.minimum ?? target.exclusiveMinimum, max: target.maximum ?? target.exclusiveMaximum, integer: target.type === "integer" };
  }
  if (target.type === "string") return { ...base, kind: (target.maxLength || 0) > 1024 ? "textarea" : "text" };
  if (target.type === "array") {
    if (target.prefixItems && target.prefixItems.every((p) => p.type === "number" || p.type === "integer")) {
      return { ...base, kind: "vector", n: target.prefixItems.length };
    }
    const item = target.items || {};
    if (refName(item) && schemaDef(refName(item))?.type === "object") return { ...base, kind: "list", itemDef: refName(item) };
    if (item.type === "string" && item.pattern && name === "characters") return { ...base, kind: "ids" };
  }
  return { ...base, kind: "json" };
}

function fieldLabel(spec) {
  const table = FIELD_LABELS[state.lang] || {};
  return table[spec.key] ?? table[spec.name] ?? FIELD_LABELS.en[spec.key] ?? FIELD_LABELS.en[spec.name] ?? spec.prop.title ?? spec.name;
}

function defaultText(spec) {
  if (spec.dflt === undefined || spec.dflt === null || typeof spec.dflt === "object") return "";
  return String(spec.dflt);
}

// ------------------------------------------------------------------ script state, undo/redo

/** The script as the editor holds it: as written, with `shots` and `characters` lists present. */
function normalise(script) {
  const copy = JSON.parse(JSON.stringify(script));
  if (!copy || typeof copy !== "object" || Array.isArray(copy)) return { shots: [] };
  if (!Array.isArray(copy.shots)) copy.shots = [];
  if (!Array.isArray(copy.characters)) copy.characters = [];
  return copy;
}

/** Record the script before a change; edits within 600 ms of each other are one undo step. */
function remember(coalesce = false) {
  const now = Date.now();
  if (!coalesce || now - state.lastPush > 600) {
    state.undo.push(JSON.stringify(state.script));
    if (state.undo.length > 200) state.undo.shift();
  }
  state.lastPush = now;
  state.redo = [];
  updateUndoButtons();
}

function updateUndoButtons() {
  document.getElementById("undo-btn").disabled = state.undo.length === 0;
  document.getElementById("redo-btn").disabled = state.redo.length === 0;
}

function undo() {
  if (!state.undo.length) return;
  state.redo.push(JSON.stringify(state.script));
  state.script = JSON.parse(state.undo.pop());
  state.lastPush = 0;
  changed(true);
}

function redo() {
  if (!state.redo.length) return;
  state.undo.push(JSON.stringify(state.script));
  state.script = JSON.parse(state.redo.pop());
  state.lastPush = 0;
  changed(true);
}

/** Replace the whole script (import, example), as one undoable step. */
function replaceScript(script) {
  remember();
  state.script = normalise(script);
  state.diagrams = {};
  document.body.dataset.scriptLoads = String(Number(document.body.dataset.scriptLoads || 0) + 1);
  changed(true);
}

/** After any change: optionally rebuild the editor, then check (debounced) and save a draft. */
function changed(rebuild) {
  if (rebuild) { state.reading = null; renderEditor(); } // list positions may have moved
  updateUndoButtons();
  localStorage.setItem("daotai.draft", JSON.stringify(state.script));
  validateSeq += 1; // an answer about the script before this change is stale now
  setCheck("checking");
  validateSoon();
}

// ------------------------------------------------------------------ validation and plan

const validateSoon = debounce(validate, 350);
let validateSeq = 0;

/** Validate, then plan with the render's own planner: "valid" means a render will start. */
async function validate() {
  const seq = ++validateSeq;
  const script = JSON.parse(JSON.stringify(state.script));
  let issues;
  let shots = null;
  try {
    const reply = await api("POST", "/v1/scripts/validate", script);
    if (seq !== validateSeq) return;
    issues = ((reply.data && reply.data.issues) || []).map((i) => ({ ...i, source: "script" }));
    if (!reply.ok && !issues.length) issues = [{ path: "", value: "", rule: errorText(reply), source: "script" }];
    if (!issues.length) {
      const [plan, read] = await Promise.all([api("POST", "/v1/plan", script), api("POST", "/v1/schema/read", script).catch(() => null)]);
      if (seq !== validateSeq) return;
      if (read && read.ok && read.data.valid) useReading(read.data.script);
      if (plan.ok && plan.data.valid) shots = plan.data.shots;
      else {
        issues = ((plan.data && plan.data.issues) || []).map((i) => ({ ...i, source: "plan" }));
        if (!issues.length) issues = [{ path: "", value: "", rule: errorText(plan), source: "plan" }];
      }
    }
  } catch (err) {
    if (seq === validateSeq) setCheck("down");
    return;
  }
  state.issues = issues;
  if (shots) {
    state.diagrams = {};
    for (const shot of shots) state.diagrams[shot.shot_id] = shot;
    drawAllStages();
  }
  showIssues();
  setCheck(issues.length ? "bad" : "ok");
  showRenderPlan();
}

let renderPlanSeq = 0;

/** Before Render: which shots this script would render and which the service would reuse
 * unchanged from its shot cache (POST /v1/scripts/render-plan, with the chosen backend and preset). */
async function showRenderPlan() {
  const seq = ++renderPlanSeq;
  const box = document.getElementById("render-plan");
  if (state.check !== "ok") { box.replaceChildren(); delete box.dataset.rendered; return; }
  const query = new URLSearchParams({ backend: document.getElementById("backend-select").value || "previz" });
  const preset = document.getElementById("preset-select").value;
  if (preset) query.set("preset", preset);
  let reply;
  try { reply = await api("POST", `/v1/scripts/render-plan?${query}`, withOptions(JSON.parse(JSON.stringify(state.script)))); }
  catch (err) { reply = null; }
  if (seq !== renderPlanSeq) return;
  if (!reply || !reply.ok || !reply.data.valid) { box.replaceChildren(); delete box.dataset.rendered; return; }
  const { shots, rendered, reused } = reply.data;
  const n = shots.length;
  const summary = !reused.length ? t("plan_all", { n }) : !rendered.length ? t("plan_none", { n })
    : t("plan_some", { r: rendered.length, n, u: reused.length });
  box.dataset.rendered = rendered.join(",");
  box.replaceChildren(
    el("p", { class: "plan-summary" }, summary),
    el("ul", { class: "plan-shots" }, ...shots.map((s) => el("li", {
      class: `plan-shot ${s.render}`, dataset: { shot: s.shot_id, render: s.render, workflow: s.workflow || "" },
      title: s.key ? `key ${s.key.slice(0, 12)}` : "",
    }, `${s.shot_id} · ${t(s.render === "reused" ? "will_reuse" : "will_render")}`,
    // MiniMax-H3: the workflow the shot will use, why, and its references in the order they are sent.
    ...(s.workflow ? [el("span", { class: "plan-workflow", title: s.why || "" }, ` · ${s.workflow}`
      + (s.segments > 1 ? ` ×${s.segments}` : "")),
    el("ul", { class: "plan-refs" }, ...(s.references || []).map((r) => el("li", {}, r)))] : [])))),
  );
}

/** Keep the service's reading; draw the forms again if they showed a word they could not read. */
function useReading(script) {
  state.reading = script;
  const active = document.activeElement;
  const typing = active && (active.tagName === "TEXTAREA" || (active.tagName === "INPUT" && ["text", "number"].includes(active.type)));
  if (state.wantsReading && !typing) {
    state.wantsReading = false;
    renderEditor();
  }
}

/** What the service read at a path of the script (undefined until it answered). */
function readingAt(path) {
  return state.reading ? readPath(state.reading, path) : undefined;
}

function errorText(reply) {
  return reply.data && reply.data.error ? reply.data.error.message : `HTTP ${reply.status}`;
}

/** The check's state (checking | ok | bad | down): the status line and whether Render is allowed. */
function setCheck(kind) {
  state.check = kind;
  const node = document.getElementById("validation-status");
  const n = state.issues.length;
  node.textContent = kind === "ok" ? t("valid") : kind === "bad" ? (n === 1 ? t("invalid_one") : t("invalid", { n })) : kind === "down" ? t("server_down") : t("checking");
  node.className = `status ${kind === "checking" ? "" : kind === "ok" ? "ok" : "bad"}`;
  node.dataset.state = kind;
  keepClearOfPanel();
  const button = document.getElementById("submit-btn");
  const reason = document.getElementById("submit-reason");
  button.disabled = kind !== "ok";
  reason.textContent = kind === "ok" ? "" : t(kind === "bad" ? "reason_problems" : kind === "down" ? "reason_down" : "reason_checking");
  reason.hidden = kind === "ok";
  button.setAttribute("aria-describedby", "submit-reason");
  if (kind !== "bad") document.getElementById("problem-list").replaceChildren();
  if (kind !== "ok") { // what would render is known again once the edit is checked
    renderPlanSeq += 1;
    const plan = document.getElementById("render-plan");
    plan.replaceChildren();
    delete plan.dataset.rendered;
  }
}

/** A field scrolled to (a link, the keyboard, the browser's find) stops below the panel that stays on top. */
function keepClearOfPanel() {
  const panel = document.getElementById("validation-panel");
  document.documentElement.style.scrollPaddingTop = `${Math.ceil(panel.getBoundingClientRect().height) + 12}px`;
}

/** The control that best matches an issue path: the exact field, else its nearest parent. */
function inputFor(path) {
  let keys = splitPath(path || "");
  while (keys.length) {
    const node = document.querySelector(`[data-path="${CSS.escape(joinPath(keys))}"]`);
    if (node) return node;
    keys = keys.slice(0, -1);
  }
  return null;
}

/** Every problem: listed at the top with a link to its field, and marked beside the field. */
function showIssues() {
  for (const node of document.querySelectorAll(".invalid")) {
    node.classList.remove("invalid");
    node.removeAttribute("aria-invalid");
  }
  for (const node of document.querySelectorAll(".issue")) node.remove();
  const list = document.getElementById("problem-list");
  list.replaceChildren(...state.issues.map((issue) => {
    const value = issue.value !== undefined && issue.value !== null && issue.value !== "" ? ` ${issue.value}` : "";
    return el("li", { dataset: { source: issue.source } },
      el("a", { href: "#", class: "problem-link", dataset: { issuePath: issue.path || "" }, onclick: (e) => { e.preventDefault(); revealField(issue.path); } }, issue.path || t("script")),
      el("span", { class: "problem-rule" }, `${value} — ${issue.rule}`),
      el("span", { class: "problem-source" }, ` (${t(issue.source === "plan" ? "from_plan" : "from_script")})`));
  }));
  keepClearOfPanel();
  for (const issue of state.issues) {
    const input = inputFor(issue.path);
    if (!input) continue;
    input.classList.add("invalid");
    input.setAttribute("aria-invalid", "true");
    const holder = input.closest(".field") || input.parentElement;
    holder.append(el("span", { class: "issue", dataset: { issue: issue.path } }, `${issue.path}: ${issue.rule}`));
  }
}

/** Open whatever folds the field, scroll it into view, focus it and flash it. */
function revealField(path) {
  const node = inputFor(path) || document.querySelector('[data-path="title"]');
  if (!node) return;
  for (let up = node.parentElement; up; up = up.parentElement) if (up.tagName === "DETAILS") up.open = true;
  node.scrollIntoView({ block: "center" });
  const focusable = node.matches("input, select, textarea, button") ? node : node.querySelector("input, select, textarea, button");
  if (focusable) focusable.focus({ preventScroll: true });
  node.classList.remove("flash");
  void node.offsetWidth; // restart the animation
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 2000);
}

// ------------------------------------------------------------------ generated forms

/** Commit an edit of one field (an undo step shared with edits in the next 600 ms). */
function edit(path, value, rebuild = false) {
  remember(true);
  writePath(state.script, path, value);
  changed(rebuild);
}

/** A labelled control for one field of the script, chosen from its schema. */
function field(def, name, path, extra = {}) {
  const prop = ((modelSchema(def) || {}).properties || {})[name];
  if (!prop) return null;
  const raw = readPath(state.script, path);
  const spec = fieldSpec(def, name, prop, raw);
  const label = fieldLabel(spec);
  const wrap = (control, cls = "") => el("label", { class: `field ${cls} ${extra.cls || ""}`, title: spec.description || undefined, dataset: { field: spec.key } },
    el("span", {}, label), control);
  switch (spec.kind) {
    case "enum": return wrap(enumSelect(spec, path, raw));
    case "number": {
      // A number written as text ("2.5 s") stays visible as written until it is edited.
      const written = typeof raw === "string";
      const implied = raw === undefined ? readingAt(path) : undefined; // e.g. the orbit of a phrase such as "orbit left 30°"
      const input = el("input", { type: written ? "text" : "number", step: "any", min: spec.min, max: spec.max,
        placeholder: typeof implied === "number" ? String(implied) : defaultText(spec) });
      input.value = raw === undefined || raw === null ? "" : String(raw);
      input.dataset.path = path;
      input.addEventListener("input", () => {
        const text = input.value.trim();
        const value = Number(text);
        edit(path, text === "" ? (spec.required ? 0 : undefined) : Number.isFinite(value) ? value : text);
      });
      return wrap(input, "narrow");
    }
    case "text": case "textarea": {
      const input = spec.kind === "textarea" ? el("textarea", { rows: 2 }) : el("input", { type: "text", placeholder: defaultText(spec) });
      input.value = raw === undefined || raw === null ? "" : String(raw);
      input.dataset.path = path;
      input.addEventListener("input", () => edit(path, input.value === "" && !spec.required ? undefined : input.value));
      if (ID_FIELDS.has(spec.key)) input.addEventListener("change", () => renderEditor());
      return wrap(input, spec.kind === "textarea" ? "wide" : ID_FIELDS.has(spec.key) ? "narrow" : "");
    }
    case "bool": {
      const input = el("input", { type: "checkbox" });
      input.checked = raw === undefined ? !!spec.dflt : !!raw;
      input.dataset.path = path;
      input.addEventListener("change", () => edit(path, input.checked));
      return wrap(input, "check");
    }
    case "colour": return wrap(colourInput(path, raw, extra.fallback));
    case "colours": return listField(spec, label, path, raw);
    case "size": {
      const input = el("input", { type: "text", placeholder: "1280x720", list: "size-presets" });
      input.value = typeof raw === "string" ? raw : Array.isArray(raw) ? raw.join("x") : raw && typeof raw === "object" ? `${raw.width}x${raw.height}` : "";
      input.dataset.path = path;
      input.addEventListener("input", () => edit(path, input.value.trim() === "" ? undefined : input.value.trim()));
      return wrap(input);
    }
    case "charref": {
      const ids = state.script.characters.map((c) => c.id).filter(Boolean);
      const select = el("select", {}, el("option", { value: "" }, spec.required ? "—" : t("none")),
        ...ids.map((id) => el("option", { value: id }, id)));
      if (typeof raw === "string" && raw && !ids.includes(raw)) select.append(el("option", { value: raw }, t("unknown_character", { w: raw })));
      select.value = typeof raw === "string" ? raw : "";
      select.dataset.path = path;
      select.addEventListener("change", () => edit(path, select.value === "" ? undefined : select.value));
      return wrap(select);
    }
    case "soundfile": return soundFileField(spec, label, path, raw);
    case "videofile": return videoFileField(spec, label, path, raw);
    case "vector": return vectorField(spec, label, path, raw);
    case "ids": return idsField(spec, label, path, raw);
    case "refs": return referencePanel(extra.character, extra.index);
    case "object": {
      return el("fieldset", { class: `group ${extra.cls || ""}`, dataset: { path, field: spec.key }, title: spec.description || undefined },
        el("legend", {}, label), ...renderRows(spec.objectDef, path));
    }
    case "list": return listField(spec, label, path, raw);
    default: {
      const input = el("input", { type: "text", class: "json" });
      input.value = raw === undefined ? "" : JSON.stringify(raw);
      input.dataset.path = path;
      input.addEventListener("change", () => {
        if (input.value.trim() === "") { edit(path, undefined); return; }
        try { edit(path, JSON.parse(input.value)); } catch (err) { input.classList.add("invalid"); }
      });
      return wrap(input, "wide");
    }
  }
}

/** A drop-down of an enum's canonical names that shows any alias the script wrote as its canonical value. */
function enumSelect(spec, path, raw) {
  const select = el("select", {});
  const dflt = defaultText(spec);
  select.append(el("option", { value: "" }, dflt ? `${t("default")} · ${vocabLabel(dflt)}` : t("none")));
  for (const choice of spec.choices) select.append(el("option", { value: choice }, vocabLabel(choice)));
  let shown = "";
  let word = raw;
  // A camera alias may imply the direction (推 is a dolly in): show it when none is written.
  if (word === undefined && spec.def === "CameraSpec" && spec.name === "direction") {
    word = cameraPreset(readPath(state.script, path.replace(/direction$/, "type"))).direction;
  }
  if (word !== undefined && word !== null) {
    shown = canonical(spec.enumDef, word) ?? (spec.choices.includes(readingAt(path)) ? readingAt(path) : null);
    if (shown === null) { // a word not read yet stays visible as written (the check says if it is wrong)
      state.wantsReading = true;
      shown = `?${word}`;
      select.append(el("option", { value: shown }, `“${word}”`));
    }
  } else {
    // A value implied by a word elsewhere: "pan left 20°" is a pan to the left.
    const implied = readingAt(path);
    if (typeof implied === "string" && implied !== spec.dflt && spec.choices.includes(implied)) shown = implied;
  }
  select.value = shown;
  select.dataset.path = path;
  select.dataset.word = typeof raw === "string" ? raw : "";
  select.addEventListener("change", () => {
    if (select.value.startsWith("?")) return;
    edit(path, select.value === "" ? undefined : select.value);
  });
  return select;
}

function colourHex(raw) {
  if (typeof raw === "string" && /^#?[0-9a-f]{6}$/i.test(raw.trim())) return `#${raw.trim().replace(/^#/, "").toLowerCase()}`;
  if (Array.isArray(raw) && raw.length === 3 && raw.every((c) => typeof c === "number")) {
    return `#${raw.map((c) => Math.round(Math.min(1, Math.max(0, c)) * 255).toString(16).padStart(2, "0")).join("")}`;
  }
  return null;
}

/** A colour picker; a colour written as a word ("brown") also shows the word, which stays editable. */
function colourInput(path, raw, fallback) {
  const input = el("input", { type: "color" });
  const read = raw !== undefined && !colourHex(raw) ? colourHex(readingAt(path)) : null;
  if (raw !== undefined && !colourHex(raw) && !read) state.wantsReading = true;
  input.value = colourHex(raw) || read || fallback || "#888888";
  const word = typeof raw === "string" && !colourHex(raw) ? el("input", { type: "text", class: "colour-word", value: raw }) : null;
  (word || input).dataset.path = path;
  input.addEventListener("change", () => edit(path, input.value, true));
  if (word) word.addEventListener("input", () => edit(path, word.value.trim() === "" ? undefined : word.value));
  return word ? el("span", { class: "colour-pair" }, input, word) : input;
}

function vectorField(spec, label, path, raw) {
  const n = Array.isArray(raw) && raw.length !== spec.n ? raw.length : spec.n;
  let names = AXES[spec.name === "position" && n === 3 ? "position3" : spec.name] || [];
  if (!Array.isArray(names)) names = names[state.lang] || names.en;
  const inputs = [];
  const box = el("div", { class: "vector", dataset: { path } });
  for (let k = 0; k < n; k += 1) {
    const implied = raw === undefined ? readingAt(path) : undefined; // e.g. the rotate of "pan left 20°"
    const input = el("input", { type: "number", step: "any", "aria-label": `${label} ${names[k] || k + 1}`,
      placeholder: Array.isArray(implied) ? String(implied[k]) : Array.isArray(spec.dflt) ? String(spec.dflt[k]) : "" });
    input.value = Array.isArray(raw) && raw[k] !== undefined && raw[k] !== null ? String(raw[k]) : "";
    input.dataset.path = `${path}[${k}]`;
    inputs.push(input);
    box.append(el("span", { class: "axis" }, names[k] || String(k + 1)), input);
    input.addEventListener("input", () => {
      const texts = inputs.map((i) => i.value.trim());
      if (texts.every((v) => v === "")) edit(path, undefined);
      else edit(path, texts.map((v) => (v === "" ? 0 : Number(v))));
    });
  }
  return el("div", { class: "field", title: spec.description || undefined, dataset: { field: spec.key } }, el("span", {}, label), box);
}

/** The soundtrack's file: its name as written, an upload button (the service keeps it as upload:snd_…) and a player. */
function soundFileField(spec, label, path, raw) {
  const input = el("input", { type: "text", placeholder: "upload:snd_…" });
  input.value = typeof raw === "string" ? raw : "";
  input.dataset.path = path;
  input.addEventListener("input", () => edit(path, input.value.trim() === "" ? undefined : input.value));
  const status = el("span", { class: "ref-status" });
  const file = el("input", { type: "file", class: "sound-file", hidden: true, accept: "audio/*,.wav,.flac,.mp3,.m4a,.aac,.ogg,.opus",
    onchange: async (e) => {
      const chosen = e.target.files[0];
      e.target.value = "";
      if (!chosen) return;
      status.textContent = t("uploading", { name: chosen.name });
      const reply = await uploadFile(chosen);
      if (!reply.ok) { status.textContent = `${chosen.name}: ${errorText(reply)}`; status.classList.add("error"); return; }
      remember();
      writePath(state.script, path, reply.data.reference);
      changed(true);
    } });
  const match = typeof raw === "string" ? /^upload:(snd_[0-9a-f]{32})$/.exec(raw) : null;
  return el("div", { class: "field wide", title: spec.description || undefined, dataset: { field: spec.key } }, el("span", {}, label),
    el("div", { class: "sound-row" }, input,
      el("button", { type: "button", class: "upload-sound", onclick: () => file.click() }, t("upload_sound")), file),
    match ? el("audio", { controls: true, preload: "none", src: `/v1/uploads/${match[1]}/content` }) : null, status);
}

/** A shot's reference footage: its file name as written, an upload button (kept as upload:vid_…) and a player. */
function videoFileField(spec, label, path, raw) {
  const input = el("input", { type: "text", placeholder: "upload:vid_…" });
  input.value = typeof raw === "string" ? raw : "";
  input.dataset.path = path;
  input.addEventListener("input", () => edit(path, input.value.trim() === "" ? undefined : input.value));
  const status = el("span", { class: "ref-status" });
  const file = el("input", { type: "file", class: "video-file", hidden: true, accept: "video/*,.mp4,.mov,.m4v,.mkv,.webm",
    onchange: async (e) => {
      const chosen = e.target.files[0];
      e.target.value = "";
      if (!chosen) return;
      status.textContent = t("uploading", { name: chosen.name });
      const reply = await uploadFile(chosen);
      if (!reply.ok) { status.textContent = `${chosen.name}: ${errorText(reply)}`; status.classList.add("error"); return; }
      remember();
      writePath(state.script, path, reply.data.reference);
      changed(true);
    } });
  const match = typeof raw === "string" ? /^upload:(vid_[0-9a-f]{32})$/.exec(raw) : null;
  return el("div", { class: "field wide", title: spec.description || undefined, dataset: { field: spec.key } }, el("span", {}, label),
    el("div", { class: "sound-row" }, input,
      el("button", { type: "button", class: "upload-video", onclick: () => file.click() }, t("upload_video")), file),
    match ? el("video", { class: "footage-preview", controls: true, muted: true, preload: "metadata", width: 192,
      src: `/v1/uploads/${match[1]}/content` }) : null, status);
}

async function uploadFile(file) {
  try {
    const form = new FormData();
    form.append("file", file, file.name);
    const response = await fetch("/v1/uploads", { method: "POST", body: form });
    return { ok: response.ok, status: response.status, data: await response.json().catch(() => null) };
  } catch (err) {
    return { ok: false, data: null, status: t("server_down") };
  }
}

/** Which characters a shot shows: every one by default, or the ones ticked. */
function idsField(spec, label, path, raw) {
  const ids = state.script.characters.map((c) => c.id).filter(Boolean);
  const chosen = Array.isArray(raw) ? raw : null;
  const box = el("div", { class: "ids", dataset: { path } });
  for (const id of [...ids, ...(chosen || []).filter((c) => !ids.includes(c))]) {
    const input = el("input", { type: "checkbox", value: id });
    input.checked = chosen ? chosen.includes(id) : true;
    input.addEventListener("change", () => {
      const next = [...box.querySelectorAll("input")].filter((i) => i.checked).map((i) => i.value);
      edit(path, next.length === ids.length && ids.every((c) => next.includes(c)) ? undefined : next, true);
    });
    box.append(el("label", { class: "check" }, input, id));
  }
  if (!chosen) box.append(el("span", { class: "hint" }, t("everyone")));
  return el("div", { class: "field", dataset: { field: spec.key } }, el("span", {}, label), box);
}

/** A list of objects (blocking moves, dialogue lines, set pieces) or colours: items with add and remove. */
function listField(spec, label, path, raw) {
  const items = Array.isArray(raw) ? raw : [];
  const rows = items.map((item, j) => {
    const itemPath = `${path}[${j}]`;
    const body = spec.kind === "colours"
      ? [colourInput(itemPath, item)]
      : renderRows(spec.itemDef, itemPath);
    return el("div", { class: "item", dataset: { path: itemPath } }, ...body,
      el("button", { type: "button", class: "remove-item", onclick: () => {
        remember();
        const list = readPath(state.script, path);
        list.splice(j, 1);
        if (!list.length) writePath(state.script, path, undefined);
        changed(true);
      } }, t("remove")));
  });
  const add = el("button", { type: "button", class: "add-item", dataset: { list: path }, onclick: () => {
    remember();
    const list = Array.isArray(readPath(state.script, path)) ? readPath(state.script, path) : [];
    list.push(spec.kind === "colours" ? "#888888" : newItem(spec.itemDef, path));
    writePath(state.script, path, list);
    changed(true);
  } }, `${t("add_item")}: ${label}`);
  return el("div", { class: "field list wide", dataset: { path, field: spec.key } }, el("span", {}, label), ...rows, add);
}

/** A new list item with its required fields filled (the first character, zeros, the first choice). */
function newItem(def, listPath) {
  const model = schemaDef(def) || {};
  const item = {};
  const shot = readPath(state.script, listPath.replace(/\.[^.]+$/, "")) || {};
  for (const name of model.required || []) {
    const spec = fieldSpec(def, name, model.properties[name], undefined);
    if (spec.kind === "charref") item[name] = shot.subject || (state.script.characters[0] || {}).id || "";
    else if (spec.kind === "vector") item[name] = Array(spec.n).fill(0);
    else if (spec.kind === "number") item[name] = spec.min !== undefined ? spec.min : 0;
    else if (spec.kind === "enum") item[name] = spec.choices[0];
    else item[name] = "";
  }
  return item;
}

/** A model's fields in the rows LAYOUT gives it, fold groups as <details>, the rest at the end. */
function renderRows(def, path, extra = {}) {
  const props = modelProps(def).map(([name]) => name);
  const layout = LAYOUT[def] || [];
  const placed = new Set(layout.flatMap((g) => g.props));
  const skip = new Set(extra.skip || []);
  const rest = props.filter((p) => !placed.has(p) && !skip.has(p));
  const groups = layout.some((g) => g.rest) ? layout : [...layout, { props: [] , rest: true }];
  const out = [];
  for (const group of groups) {
    const names = [...group.props.filter((p) => props.includes(p) && !skip.has(p)), ...(group.rest ? rest : [])];
    if (!names.length) continue;
    const sub = path ? (name) => `${path}.${name}` : (name) => name;
    const controls = names.map((name) => {
      const prop = modelSchema(def).properties[name];
      const spec = fieldSpec(def, name, prop, readPath(state.script, sub(name)));
      // A fold holding one object shows the object's fields directly.
      if (group.fold && names.length === 1 && spec.kind === "object") return renderRows(spec.objectDef, sub(name));
      return field(def, name, sub(name), extra[name] || {});
    }).flat().filter(Boolean);
    const row = el("div", { class: "fields" }, ...controls);
    if (!group.fold) { out.push(row); continue; }
    const key = `${path}#${group.key}`;
    const used = names.some((name) => readPath(state.script, sub(name)) !== undefined);
    const details = el("details", { class: `fold fold-${group.key}`, dataset: { fold: group.key, path: names.length === 1 ? sub(names[0]) : undefined } },
      el("summary", {}, t(`group_${group.key}`), used ? el("span", { class: "dot", "aria-hidden": "true" }, " •") : null), row);
    details.open = used || state.openGroups.has(key);
    details.addEventListener("toggle", () => { if (details.open) state.openGroups.add(key); else state.openGroups.delete(key); });
    out.push(details);
  }
  return out;
}

// ------------------------------------------------------------------ the editor

/** Rebuild every form from the script; the focused control keeps its focus. */
function renderEditor() {
  const active = document.activeElement;
  const focusKey = active && active.dataset ? (active.dataset.handle ? `[data-stage-key="${CSS.escape(active.dataset.stageKey)}"]` : active.dataset.path ? `[data-path="${CSS.escape(active.dataset.path)}"]` : null) : null;
  if (!state.schema) return;
  document.getElementById("script-fields").replaceChildren(...renderRows("Script", "", { skip: ["scene", "characters", "shots"] }));
  const scene = readPath(state.script, "scene");
  document.getElementById("scene-fields").replaceChildren(...(scene === undefined || typeof scene === "object" || typeof scene === "string" ? renderRows("Scene", "scene") : []));
  renderCharacters();
  renderShots();
  showIssues();
  if (focusKey) {
    const again = document.querySelector(focusKey);
    if (again) again.focus({ preventScroll: true });
  }
}

function renderCharacters() {
  const list = document.getElementById("character-list");
  list.replaceChildren(...state.script.characters.map((c, i) => el("div", { class: "card", dataset: { kind: "character", index: i } },
    el("div", { class: "body" },
      ...renderRows("Character", `characters[${i}]`, {
        colour: { fallback: PALETTE[i % PALETTE.length] },
        reference_images: { character: c, index: i },
      }),
      el("div", { class: "card-actions" },
        el("button", { type: "button", class: "delete-character", onclick: () => { remember(); state.script.characters.splice(i, 1); changed(true); } }, t("delete"))),
    ))));
}

// ------------------------------------------------------------------ reference images

/** A character's reference images: thumbnails with remove buttons, then an upload button that is also a drop zone. */
function referencePanel(character, i) {
  const refs = Array.isArray(character.reference_images) ? character.reference_images : [];
  const input = el("input", { type: "file", class: "ref-file", hidden: true, multiple: true, accept: REFERENCE_TYPES.join(","),
    onchange: (e) => { const files = [...e.target.files]; e.target.value = ""; uploadReferences(character.id, i, files); } });
  const zone = el("div", { class: "dropzone" },
    el("button", { type: "button", class: "upload-ref", onclick: () => input.click() }, t("upload_image")),
    el("span", { class: "hint" }, t("drop_here")), input);
  zone.addEventListener("dragover", (e) => { e.preventDefault(); e.dataTransfer.dropEffect = "copy"; zone.classList.add("drag-over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("drag-over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("drag-over");
    uploadReferences(character.id, i, [...(e.dataTransfer ? e.dataTransfer.files : [])]);
  });
  const thumbs = refs.map((ref, j) => {
    const match = typeof ref === "string" ? UPLOAD_REF.exec(ref) : null;
    // A path from an imported script cannot be shown (the server reads no paths): its name stands in.
    const picture = match
      ? el("img", { src: `/v1/uploads/${match[1]}/content`, alt: t("reference_n", { n: j + 1 }), width: 96, height: 96 })
      : el("span", { class: "ref-name" }, String(ref));
    return el("figure", { class: match ? "ref-thumb" : "ref-thumb missing", dataset: { ref: String(ref) } }, picture,
      el("button", { type: "button", class: "remove-ref", onclick: () => removeReference(i, j) }, t("remove")));
  });
  const status = state.refStatus[character.id];
  return el("div", { class: "field refs", dataset: { path: `characters[${i}].reference_images` } },
    el("span", {}, t("reference_images")),
    el("div", { class: "ref-row" }, ...thumbs, zone),
    status ? el("span", { class: `ref-status ${status.kind}` }, status.text) : null);
}

/** Upload files one by one; each stored image is added to the character as `upload:<id>` (one undo step each). */
async function uploadReferences(characterId, index, files) {
  for (const file of files) {
    state.refStatus[characterId] = { text: t("uploading", { name: file.name }), kind: "" };
    renderCharacters();
    showIssues();
    const reply = await uploadFile(file);
    if (!reply.ok) {
      const message = reply.data && reply.data.error ? reply.data.error.message : String(reply.status);
      state.refStatus[characterId] = { text: `${file.name}: ${message}`, kind: "error" };
      renderCharacters();
      showIssues();
      continue;
    }
    delete state.refStatus[characterId];
    // Find the character again: the script may have changed while the file was on its way.
    const character = state.script.characters.find((c) => c.id === characterId) || state.script.characters[index];
    if (!character) continue;
    remember();
    const refs = Array.isArray(character.reference_images) ? character.reference_images : [];
    if (!refs.includes(reply.data.reference)) refs.push(reply.data.reference);
    character.reference_images = refs;
    changed(true);
  }
}

function removeReference(i, j) {
  const character = state.script.characters[i];
  remember();
  character.reference_images.splice(j, 1);
  if (character.reference_images.length === 0) delete character.reference_images;
  changed(true);
}

function renderShots() {
  const list = document.getElementById("shot-list");
  list.replaceChildren(...state.script.shots.map((shot, i) => {
    const previewBox = el("div", { class: "preview", dataset: { shot: shot.shot_id || "" } });
    renderPreview(previewBox);
    // Only the handle starts a drag, so selecting text inside the inputs still works.
    const handle = el("span", { class: "handle", title: t("drag") }, "⠿");
    const card = el("div", { class: "card shot", dataset: { index: i } },
      handle,
      el("div", { class: "body" },
        ...renderRows("Shot", `shots[${i}]`),
        el("div", { class: "card-actions" },
          el("button", { type: "button", class: "duplicate-shot", onclick: () => duplicateShot(i) }, t("duplicate")),
          el("button", { type: "button", class: "delete-shot", disabled: state.script.shots.length <= 1, onclick: () => { remember(); state.script.shots.splice(i, 1); changed(true); } }, t("delete")),
          el("button", { type: "button", class: "preview-shot", onclick: () => previewShot(i) }, t("preview")),
        ),
      ),
      el("div", { class: "side" }, stageView(shot, i), previewBox),
    );
    card.addEventListener("dragstart", (e) => { card.classList.add("dragging"); e.dataTransfer.setData("text/plain", String(i)); e.dataTransfer.effectAllowed = "move"; });
    handle.addEventListener("mousedown", () => { card.draggable = true; });
    handle.addEventListener("mouseup", () => { card.draggable = false; });
    card.addEventListener("dragend", () => { card.classList.remove("dragging"); card.draggable = false; });
    card.addEventListener("dragover", (e) => { if (!state.drag) { e.preventDefault(); card.classList.add("drop-target"); } });
    card.addEventListener("dragleave", () => card.classList.remove("drop-target"));
    card.addEventListener("drop", (e) => { e.preventDefault(); card.classList.remove("drop-target"); moveShot(Number(e.dataTransfer.getData("text/plain")), i); });
    return card;
  }));
  drawAllStages();
}

function uniqueShotId(base) {
  const taken = new Set(state.script.shots.map((s) => s.shot_id));
  for (let n = 2; ; n += 1) {
    const candidate = `${base}_${n}`;
    if (!taken.has(candidate)) return candidate;
  }
}

function duplicateShot(i) {
  remember();
  const copy = JSON.parse(JSON.stringify(state.script.shots[i]));
  copy.shot_id = uniqueShotId(copy.shot_id || "shot");
  state.script.shots.splice(i + 1, 0, copy);
  changed(true);
}

function moveShot(from, to) {
  if (!Number.isInteger(from) || from === to || from < 0 || from >= state.script.shots.length) return;
  remember();
  const [shot] = state.script.shots.splice(from, 1);
  state.script.shots.splice(to, 0, shot);
  changed(true);
}

// ------------------------------------------------------------------ the floor plan (staging editor)
//
// Top-down, x to the right and +z down the page. The planner's own positions are drawn (from
// POST /v1/plan); marks laid over the canvas are buttons, so they take the keyboard focus.
// Each drag is one undo step and writes the script: a character's place at the start of the
// shot (its `position`, or the waypoint that brought it there in an earlier shot), its facing,
// the shot's blocking waypoints, and the camera's move (motion, orbit, or pan angle).

function stageView(shot, i) {
  const canvas = el("canvas", { class: "diagram", dataset: { shot: shot.shot_id || "" }, "aria-hidden": "true" });
  const stage = el("div", { class: "stage", role: "group", "aria-label": `${t("diagram")} ${shot.shot_id || ""}`, dataset: { shot: shot.shot_id || "", index: i } },
    canvas, el("div", { class: "marks" }));
  canvas.addEventListener("dblclick", (e) => addWaypoint(e, stage));
  return el("div", { class: "stage-wrap" }, stage, el("p", { class: "stage-help" }, t("stage_help")));
}

/** Double-click on the floor: the character last moved (else the subject) walks there, after its other walks. */
function addWaypoint(e, stage) {
  const i = Number(stage.dataset.index);
  const data = state.diagrams[stage.dataset.shot];
  const shot = state.script.shots[i];
  if (!data || !shot) return;
  const rect = stage.querySelector("canvas").getBoundingClientRect();
  const view = stageView2d(stageModel(i, data), data, rect.width, rect.height);
  const [x, z] = worldAt(stage, view, e.clientX, e.clientY);
  const present = data.characters.map((c) => c.id);
  const last = state.lastCharacter[stage.dataset.shot];
  const id = present.includes(last) ? last : data.subject || present[0];
  if (!id) return;
  remember();
  const moves = Array.isArray(readPath(state.script, `shots[${i}].blocking`)) ? readPath(state.script, `shots[${i}].blocking`) : [];
  const move = { character: id, to: [round2(x), round2(z)] };
  const earlier = moves.filter((m) => m.character === id);
  if (earlier.length) {
    const last = earlier[earlier.length - 1];
    const duration = typeof shot.duration === "number" ? shot.duration : 4;
    if (typeof last.end !== "number") last.end = round2(((typeof last.start === "number" ? last.start : 0) + duration) / 2);
    move.start = last.end;
  }
  moves.push(move);
  writePath(state.script, `shots[${i}].blocking`, moves);
  state.openGroups.add(`shots[${i}]#blocking`);
  changed(true);
}

function drawAllStages() {
  for (const stage of document.querySelectorAll(".stage")) drawStage(stage);
}

function characterColour(id) {
  const i = state.script.characters.findIndex((c) => c.id === id);
  if (i < 0) return "#888";
  return colourHex(state.script.characters[i].colour) || PALETTE[i % PALETTE.length];
}

/** Unit vectors of the shot's start camera (world): forward f, right r, up u. */
function cameraAxes(data) {
  const p = data.start.position;
  const a = data.aim_point;
  let f = [a[0] - p[0], a[1] - p[1], a[2] - p[2]];
  let n = Math.hypot(...f);
  if (n < 1e-6) { f = [data.start.forward[0], 0, data.start.forward[1]]; n = 1; }
  f = f.map((v) => v / n);
  let r = [-f[2], 0, f[0]];
  const rn = Math.hypot(...r) || 1;
  r = r.map((v) => v / rn);
  const u = [r[1] * f[2] - r[2] * f[1], r[2] * f[0] - r[0] * f[2], r[0] * f[1] - r[1] * f[0]];
  return { f, r, u };
}

/** The camera kind as the planner reads it: canonical type of the shot's (possibly aliased) move. */
function shotCameraType(i) {
  const path = `shots[${i}].camera.type`;
  return canonical("CameraType", readPath(state.script, path) ?? "static") || readingAt(path) || "static";
}

/** What the floor plan of shot i shows, with the drag in progress applied. */
function stageModel(i, data) {
  const drag = state.drag && state.drag.index === i ? state.drag : null;
  const chars = data.characters.map((c) => ({ id: c.id, x: c.position[0], z: c.position[1], facing: c.facing, subject: c.id === data.subject }));
  const shot = state.script.shots[i] || {};
  const ways = (Array.isArray(shot.blocking) ? shot.blocking : []).map((m, j) => ({ j, id: m.character, x: Array.isArray(m.to) ? m.to[0] : 0, z: Array.isArray(m.to) ? m.to[1] : 0 }));
  const type = shotCameraType(i);
  const cam = { start: data.start, end: { ...data.end, position: [...data.end.position], forward: [...data.end.forward] }, path: data.path, type };
  if (drag) {
    const c = chars.find((k) => k.id === drag.id);
    if (drag.kind === "char" && c) { c.x = drag.x; c.z = drag.z; }
    if (drag.kind === "facing" && c) c.facing = drag.facing;
    const w = ways.find((k) => k.j === drag.j);
    if (drag.kind === "way" && w) { w.x = drag.x; w.z = drag.z; }
    if (drag.kind === "camend" || drag.kind === "orbit") { cam.end.position[0] = drag.x; cam.end.position[2] = drag.z; cam.path = [cam.start.position, cam.end.position]; }
    if (drag.kind === "aim") cam.end.forward = drag.forward;
  }
  return { chars, ways, cam };
}

/** World → screen mapping that fits everything on the plan (kept still while a drag runs). */
function stageView2d(model, data, w, h) {
  const pts = [[data.aim_point[0], data.aim_point[2]], [model.cam.start.position[0], model.cam.start.position[2]], [model.cam.end.position[0], model.cam.end.position[2]]];
  for (const p of data.path) pts.push([p[0], p[2]]);
  for (const c of model.chars) pts.push([c.x, c.z]);
  for (const wp of model.ways) pts.push([wp.x, wp.z]);
  const xs = pts.map((p) => p[0]);
  const zs = pts.map((p) => p[1]);
  const span = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...zs) - Math.min(...zs), 1.5) * 1.35;
  return { cx: (Math.max(...xs) + Math.min(...xs)) / 2, cz: (Math.max(...zs) + Math.min(...zs)) / 2, k: Math.min(w, h) / span, w, h };
}

function drawStage(stage) {
  const i = Number(stage.dataset.index);
  const data = state.diagrams[stage.dataset.shot];
  const canvas = stage.querySelector("canvas");
  const w = stage.clientWidth || 300;
  const h = Math.round(w * 0.75);
  const ctx = canvas.getContext("2d");
  const scale = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * scale);
  canvas.height = Math.round(h * scale);
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const marks = stage.querySelector(".marks");
  if (!data || !state.script.shots[i]) { marks.replaceChildren(); return; }
  const model = stageModel(i, data);
  const view = state.drag && state.drag.index === i ? state.drag.view : stageView2d(model, data, w, h);
  stage.dataset.scale = String(view.k);
  const at = (x, z) => [view.w / 2 + (x - view.cx) * view.k, view.h / 2 + (z - view.cz) * view.k];
  // metre grid
  ctx.strokeStyle = "#ece9e3";
  ctx.lineWidth = 1;
  const half = Math.max(view.w, view.h) / view.k;
  for (let g = Math.floor(view.cx - half); g <= view.cx + half; g += 1) { const [gx] = at(g, 0); ctx.beginPath(); ctx.moveTo(gx, 0); ctx.lineTo(gx, view.h); ctx.stroke(); }
  for (let g = Math.floor(view.cz - half); g <= view.cz + half; g += 1) { const [, gz] = at(0, g); ctx.beginPath(); ctx.moveTo(0, gz); ctx.lineTo(view.w, gz); ctx.stroke(); }
  // the 180° line: through the subject and the nearest other character in the shot
  const subject = model.chars.find((c) => c.subject) || model.chars[0];
  const others = model.chars.filter((c) => c !== subject).sort((a, b) => Math.hypot(a.x - subject.x, a.z - subject.z) - Math.hypot(b.x - subject.x, b.z - subject.z));
  if (subject && others.length && Math.hypot(others[0].x - subject.x, others[0].z - subject.z) > 1e-3) {
    const [ax, ay] = at(subject.x, subject.z);
    const [bx, by] = at(others[0].x, others[0].z);
    const len = Math.hypot(bx - ax, by - ay);
    const ux = (bx - ax) / len;
    const uy = (by - ay) / len;
    const far = view.w + view.h;
    ctx.strokeStyle = "rgba(60,60,160,0.45)";
    ctx.setLineDash([8, 5]);
    ctx.beginPath(); ctx.moveTo(ax - ux * far, ay - uy * far); ctx.lineTo(ax + ux * far, ay + uy * far); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = "rgba(60,60,160,0.8)";
    ctx.font = "10px sans-serif";
    ctx.fillText(t("line_180"), Math.min(Math.max((ax + bx) / 2 + 4, 2), view.w - 60), Math.min(Math.max((ay + by) / 2 - 6, 10), view.h - 4));
  }
  // blocking paths: from where each character starts, through its waypoints
  for (const c of model.chars) {
    const path = model.ways.filter((wp) => wp.id === c.id);
    if (!path.length) continue;
    ctx.strokeStyle = characterColour(c.id);
    ctx.setLineDash([2, 3]);
    ctx.beginPath();
    ctx.moveTo(...at(c.x, c.z));
    for (const wp of path) ctx.lineTo(...at(wp.x, wp.z));
    ctx.stroke();
    ctx.setLineDash([]);
    for (const wp of path) { const [x, y] = at(wp.x, wp.z); ctx.strokeRect(x - 4, y - 4, 8, 8); }
  }
  // characters
  for (const c of model.chars) {
    const [x, y] = at(c.x, c.z);
    ctx.fillStyle = characterColour(c.id);
    ctx.beginPath(); ctx.arc(x, y, c.subject ? 8 : 6, 0, 2 * Math.PI); ctx.fill();
    const yaw = (c.facing * Math.PI) / 180; // facing 0 looks toward +z, 90 toward +x
    ctx.strokeStyle = "#333";
    ctx.lineWidth = 2;
    ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + Math.sin(yaw) * 20, y + Math.cos(yaw) * 20); ctx.stroke();
    ctx.lineWidth = 1;
    ctx.fillStyle = "#333";
    ctx.font = "11px sans-serif";
    ctx.fillText(c.id, x + 9, y - 8);
  }
  // camera path, start (hollow) and end (filled) with their fields of view
  const cam = model.cam;
  ctx.strokeStyle = "#b0342a";
  ctx.setLineDash([4, 3]);
  ctx.beginPath();
  cam.path.forEach((p, k) => { const [x, y] = at(p[0], p[2]); if (k) ctx.lineTo(x, y); else ctx.moveTo(x, y); });
  ctx.lineTo(...at(cam.end.position[0], cam.end.position[2]));
  ctx.stroke();
  ctx.setLineDash([]);
  drawCamera(ctx, at, cam.start, data.aspect, "rgba(176,52,42,0.10)", false);
  drawCamera(ctx, at, cam.end, data.aspect, "rgba(176,52,42,0.22)", true);
  syncMarks(stage, i, model, at, data);
}

/** One camera: a wedge of its horizontal field of view and a marker (hollow start, filled end). */
function drawCamera(ctx, at, pose, aspect, fill, filled) {
  const [x, y] = at(pose.position[0], pose.position[2]);
  const half = Math.atan(Math.tan((pose.fov * Math.PI) / 360) * aspect); // horizontal half-angle
  const heading = Math.atan2(pose.forward[1], pose.forward[0]);
  const reach = 70;
  ctx.fillStyle = fill;
  ctx.beginPath();
  ctx.moveTo(x, y);
  ctx.lineTo(x + Math.cos(heading - half) * reach, y + Math.sin(heading - half) * reach);
  ctx.lineTo(x + Math.cos(heading + half) * reach, y + Math.sin(heading + half) * reach);
  ctx.closePath();
  ctx.fill();
  ctx.strokeStyle = "#b0342a";
  ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + Math.cos(heading) * 24, y + Math.sin(heading) * 24); ctx.stroke();
  ctx.beginPath(); ctx.arc(x, y, 5, 0, 2 * Math.PI);
  if (filled) { ctx.fillStyle = "#b0342a"; ctx.fill(); } else { ctx.stroke(); }
}

const AIM_REACH_PX = 40; // the pan mark sits this far along the end camera's view

/** The focusable marks over the canvas, reused between redraws so a drag keeps its pointer. */
function syncMarks(stage, i, model, at, data) {
  const specs = [];
  for (const c of model.chars) {
    const [x, y] = at(c.x, c.z);
    const yaw = (c.facing * Math.PI) / 180;
    specs.push({ key: `char:${c.id}`, kind: "char", id: c.id, x, y, wx: c.x, wz: c.z, facing: c.facing,
      label: t("h_char", { id: c.id, x: fmt(c.x), z: fmt(c.z), f: Math.round(c.facing) }) });
    specs.push({ key: `facing:${c.id}`, kind: "facing", id: c.id, x: x + Math.sin(yaw) * 20, y: y + Math.cos(yaw) * 20, facing: c.facing,
      label: t("h_facing", { id: c.id, f: Math.round(c.facing) }) });
  }
  for (const wp of model.ways) {
    const [x, y] = at(wp.x, wp.z);
    specs.push({ key: `way:${wp.j}`, kind: "way", id: wp.id, j: wp.j, x, y, wx: wp.x, wz: wp.z, label: t("h_way", { id: wp.id, x: fmt(wp.x), z: fmt(wp.z) }) });
  }
  const end = model.cam.end;
  const [ex, ey] = at(end.position[0], end.position[2]);
  if (MOTION_MOVES.has(model.cam.type)) {
    specs.push({ key: "camend", kind: "camend", x: ex, y: ey, wx: end.position[0], wz: end.position[2], label: t("h_camend", { x: fmt(end.position[0]), z: fmt(end.position[2]) }) });
  } else if (model.cam.type === "orbit") {
    specs.push({ key: "orbit", kind: "orbit", x: ex, y: ey, wx: end.position[0], wz: end.position[2], label: t("h_orbit", { a: Math.round(currentOrbit(i, data)) }) });
  } else if (model.cam.type === "pan") {
    specs.push({ key: "aim", kind: "aim", x: ex + end.forward[0] * AIM_REACH_PX, y: ey + end.forward[1] * AIM_REACH_PX,
      label: t("h_aim", { a: Math.round(currentPan(i, data)) }) });
  }
  const marks = stage.querySelector(".marks");
  const existing = new Map([...marks.children].map((b) => [b.dataset.handle, b]));
  const keep = new Set();
  for (const spec of specs) {
    let button = existing.get(spec.key);
    if (!button) {
      button = el("button", { type: "button", class: `mark mark-${spec.kind}` });
      button.dataset.handle = spec.key;
      button.dataset.stageKey = `${stage.dataset.shot}/${spec.key}`;
      button.addEventListener("pointerdown", (e) => startDrag(e, stage, button));
      button.addEventListener("keydown", (e) => nudge(e, stage, button));
      marks.append(button);
    }
    keep.add(spec.key);
    button.style.left = `${spec.x}px`;
    button.style.top = `${spec.y}px`;
    button.setAttribute("aria-label", spec.label);
    button.title = spec.label;
    for (const k of ["kind", "id", "j", "wx", "wz", "facing"]) {
      if (spec[k] === undefined) delete button.dataset[k];
      else button.dataset[k] = typeof spec[k] === "number" ? String(round2(spec[k])) : spec[k];
    }
    if (spec.wx !== undefined) { button.dataset.x = String(spec.wx); button.dataset.z = String(spec.wz); }
  }
  for (const [key, button] of existing) if (!keep.has(key)) button.remove();
}

/** The pointer's place on the plan, in world metres. */
function worldAt(stage, view, clientX, clientY) {
  const rect = stage.querySelector("canvas").getBoundingClientRect();
  return [view.cx + (clientX - rect.left - view.w / 2) / view.k, view.cz + (clientY - rect.top - view.h / 2) / view.k];
}

function startDrag(e, stage, button) {
  if (e.button !== 0) return;
  const i = Number(stage.dataset.index);
  const data = state.diagrams[stage.dataset.shot];
  if (!data) return;
  e.preventDefault();
  button.focus({ preventScroll: true });
  if (button.dataset.id) state.lastCharacter[stage.dataset.shot] = button.dataset.id;
  const rect = stage.querySelector("canvas").getBoundingClientRect();
  const model = stageModel(i, data);
  const view = stageView2d(model, data, rect.width, rect.height);
  const [px, pz] = worldAt(stage, view, e.clientX, e.clientY);
  const b = button.dataset;
  // The offset keeps the mark under the same point of the pointer as it was grabbed.
  const ox = b.x !== undefined ? Number(b.x) - px : 0;
  const oz = b.z !== undefined ? Number(b.z) - pz : 0;
  state.drag = { index: i, kind: b.kind, id: b.id, j: b.j !== undefined ? Number(b.j) : undefined, view, ox, oz, moved: false,
    x: b.x !== undefined ? Number(b.x) : px, z: b.z !== undefined ? Number(b.z) : pz, facing: Number(b.facing || 0), forward: data.end.forward };
  button.setPointerCapture(e.pointerId);
  const move = (ev) => {
    const drag = state.drag;
    if (!drag) return;
    const [wx, wz] = worldAt(stage, drag.view, ev.clientX, ev.clientY);
    drag.moved = true;
    applyPointer(drag, data, wx, wz);
    drawStage(stage);
  };
  const up = (ev) => {
    button.removeEventListener("pointermove", move);
    button.removeEventListener("pointerup", up);
    button.removeEventListener("pointercancel", up);
    const drag = state.drag;
    state.drag = null;
    if (drag && drag.moved && ev.type === "pointerup") commitStage(i, drag, data);
    else drawStage(stage);
  };
  button.addEventListener("pointermove", move);
  button.addEventListener("pointerup", up);
  button.addEventListener("pointercancel", up);
}

/** Turn a pointer position into the dragged mark's new value. */
function applyPointer(drag, data, wx, wz) {
  if (drag.kind === "facing") {
    const c = data.characters.find((k) => k.id === drag.id);
    const base = state.drag && state.drag.index === drag.index ? stageModel(drag.index, data).chars.find((k) => k.id === drag.id) : null;
    const cx = base ? base.x : c.position[0];
    const cz = base ? base.z : c.position[1];
    drag.facing = Math.round((Math.atan2(wx - cx, wz - cz) * 180) / Math.PI);
  } else if (drag.kind === "aim") { // the end camera looks toward the pointer
    const dx = wx - data.end.position[0];
    const dz = wz - data.end.position[2];
    const n = Math.hypot(dx, dz) || 1;
    drag.forward = [dx / n, dz / n];
  } else {
    drag.x = round2(wx + drag.ox);
    drag.z = round2(wz + drag.oz);
  }
}

/** Arrow keys move a mark 0.1 m (Shift: 0.5 m); Q / E (and arrows on a facing or pan mark) turn 15°. */
function nudge(e, stage, button) {
  const i = Number(stage.dataset.index);
  const data = state.diagrams[stage.dataset.shot];
  if (!data) return;
  const b = button.dataset;
  if (b.id) state.lastCharacter[stage.dataset.shot] = b.id;
  const step = e.shiftKey ? 0.5 : 0.1;
  const turn = { q: -15, e: 15, Q: -15, E: 15 }[e.key];
  const arrows = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] }[e.key];
  if (!turn && !arrows) return;
  e.preventDefault();
  const drag = { index: i, kind: b.kind, id: b.id, j: b.j !== undefined ? Number(b.j) : undefined, x: Number(b.x), z: Number(b.z), facing: Number(b.facing || 0) };
  if (b.kind === "facing" || (b.kind === "char" && turn)) {
    const delta = turn || (arrows[0] + arrows[1] > 0 ? 15 : -15);
    drag.kind = "facing";
    drag.facing = normaliseAngle(drag.facing + delta);
  } else if (b.kind === "aim") {
    const delta = ((turn || (arrows[0] + arrows[1] > 0 ? 15 : -15)) * Math.PI) / 180 / 3; // 5° a press
    const [fx, fz] = data.end.forward;
    drag.forward = [fx * Math.cos(delta) - fz * Math.sin(delta), fx * Math.sin(delta) + fz * Math.cos(delta)];
  } else if (arrows) {
    drag.x = round2(drag.x + arrows[0]);
    drag.z = round2(drag.z + arrows[1]);
  } else return;
  commitStage(i, drag, data, true);
}

function normaliseAngle(deg) {
  let a = deg % 360;
  if (a > 180) a -= 360;
  if (a < -180) a += 360;
  return a;
}

/** Where a character's place at the start of shot i is written: the last waypoint before it, else its position. */
function standingPath(i, id) {
  for (let s = i - 1; s >= 0; s -= 1) {
    const moves = state.script.shots[s].blocking;
    if (!Array.isArray(moves)) continue;
    for (let j = moves.length - 1; j >= 0; j -= 1) if (moves[j].character === id) return { place: `shots[${s}].blocking[${j}].to`, facing: `shots[${s}].blocking[${j}].facing` };
  }
  const c = state.script.characters.findIndex((k) => k.id === id);
  return c < 0 ? null : { place: `characters[${c}].position`, facing: `characters[${c}].facing` };
}

/** Explicit camera amounts replace what an alias implied: drop `direction`, write the canonical type. */
function explicitCamera(i) {
  const typePath = `shots[${i}].camera.type`;
  const word = readPath(state.script, typePath);
  const plain = word === undefined ? null : canonical("CameraType", word);
  if (word !== undefined && plain === null && readingAt(typePath)) writePath(state.script, typePath, readingAt(typePath)); // a phrase
  else if (plain !== null && Object.keys(cameraPreset(word)).length) writePath(state.script, typePath, plain);
  writePath(state.script, `shots[${i}].camera.direction`, undefined);
}

/** The orbit angle the shot has now (the script's, else the planner's), in the script's sign. */
function currentOrbit(i, data) {
  const raw = readPath(state.script, `shots[${i}].camera.orbit`);
  if (typeof raw === "number") return raw;
  const a = data.aim_point;
  const v0 = [data.start.position[0] - a[0], data.start.position[2] - a[2]];
  const v1 = [data.end.position[0] - a[0], data.end.position[2] - a[2]];
  return -(Math.atan2(v0[0] * v1[1] - v0[1] * v1[0], v0[0] * v1[0] + v0[1] * v1[1]) * 180) / Math.PI;
}

/** The pan angle the shot has now: from the start camera's view to the end camera's. */
function currentPan(i, data, forward = data.end.forward) {
  const f = data.start.forward;
  return (Math.atan2(f[0] * forward[1] - f[1] * forward[0], f[0] * forward[0] + f[1] * forward[1]) * 180) / Math.PI;
}

/** Write one floor-plan edit into the script (one undo step) and show it at once. */
function commitStage(i, drag, data, coalesce = false) {
  const shotPath = `shots[${i}]`;
  remember(coalesce);
  const diagram = state.diagrams[state.script.shots[i].shot_id];
  if (drag.kind === "char") {
    const target = standingPath(i, drag.id);
    if (target) writePath(state.script, target.place, [round2(drag.x), round2(drag.z)]);
    const c = diagram && diagram.characters.find((k) => k.id === drag.id);
    if (c) c.position = [drag.x, drag.z];
  } else if (drag.kind === "facing") {
    const target = standingPath(i, drag.id);
    if (target) writePath(state.script, target.facing, normaliseAngle(Math.round(drag.facing)));
    const c = diagram && diagram.characters.find((k) => k.id === drag.id);
    if (c) c.facing = drag.facing;
  } else if (drag.kind === "way") {
    writePath(state.script, `${shotPath}.blocking[${drag.j}].to`, [round2(drag.x), round2(drag.z)]);
  } else if (drag.kind === "camend") {
    const { r, u, f } = cameraAxes(data);
    const p0 = data.start.position;
    const d = [0, 1, 2].map((k) => data.end.position[k] - p0[k]);
    const z = f.map((v) => -v);
    const my = d[0] * u[0] + d[1] * u[1] + d[2] * u[2];
    const dx = drag.x - p0[0] - my * u[0];
    const dz = drag.z - p0[2] - my * u[2];
    const det = r[0] * z[2] - z[0] * r[2];
    let mx;
    let mz;
    if (Math.abs(det) > 0.05) {
      mx = (dx * z[2] - z[0] * dz) / det;
      mz = (r[0] * dz - r[2] * dx) / det;
    } else { // looking nearly straight down: only the sideways part can be read from the plan
      mx = dx * r[0] + dz * r[2];
      mz = d[0] * z[0] + d[1] * z[1] + d[2] * z[2];
    }
    explicitCamera(i);
    writePath(state.script, `${shotPath}.camera.motion`, [round2(mx), round2(my), round2(mz)]);
    if (diagram) { diagram.end.position = [drag.x, diagram.end.position[1], drag.z]; diagram.path = [diagram.start.position, diagram.end.position]; }
  } else if (drag.kind === "orbit") {
    const a = data.aim_point;
    const v1 = [data.end.position[0] - a[0], data.end.position[2] - a[2]];
    const v2 = [drag.x - a[0], drag.z - a[2]];
    const turn = -(Math.atan2(v1[0] * v2[1] - v1[1] * v2[0], v1[0] * v2[0] + v1[1] * v2[1]) * 180) / Math.PI;
    const orbit = Math.round(currentOrbit(i, data) + turn);
    explicitCamera(i);
    writePath(state.script, `${shotPath}.camera.orbit`, Math.max(-720, Math.min(720, orbit)));
    if (diagram) { diagram.end.position = [drag.x, diagram.end.position[1], drag.z]; diagram.path = [diagram.start.position, diagram.end.position]; }
  } else if (drag.kind === "aim") {
    const pan = Math.round(currentPan(i, data, drag.forward));
    const rotate = readPath(state.script, `${shotPath}.camera.rotate`);
    explicitCamera(i);
    writePath(state.script, `${shotPath}.camera.rotate`, [pan, Array.isArray(rotate) ? rotate[1] : 0, Array.isArray(rotate) ? rotate[2] : 0]);
    if (diagram) diagram.end.forward = drag.forward;
  }
  changed(true);
  refreshPreviewSoon(state.script.shots[i].shot_id);
}

/** A quick preview already shown for a shot follows the shot's staging. */
const previewTimers = {};
function refreshPreviewSoon(shotId) {
  const preview = state.previews[shotId];
  if (!preview || !preview.job || !TERMINAL.has(preview.job.status)) return;
  clearTimeout(previewTimers[shotId]);
  previewTimers[shotId] = setTimeout(() => {
    const i = state.script.shots.findIndex((s) => s.shot_id === shotId);
    if (i >= 0 && state.check !== "bad") previewShot(i);
  }, 1200);
}

// ------------------------------------------------------------------ runs

function buildSelectors() {
  const backend = document.getElementById("backend-select");
  const keep = backend.value || "previz";
  backend.replaceChildren(...state.backends.map((b) => el("option", { value: b }, b)));
  backend.value = state.backends.includes(keep) ? keep : state.backends[0];
  const preset = document.getElementById("preset-select");
  const keepPreset = preset.value;
  preset.replaceChildren(el("option", { value: "" }, t("script_size")), ...state.sizePresets.map((p) => el("option", { value: p }, p)));
  preset.value = keepPreset;
  document.getElementById("size-presets").replaceChildren(...state.sizePresets.map((p) => el("option", { value: p })));
}

async function submitJob(script, backend, preset) {
  const query = new URLSearchParams({ backend });
  if (preset) query.set("preset", preset);
  return api("POST", `/v1/jobs?${query}`, withOptions(script));
}

/** The script with the backend options of the chosen saved settings (none: the backend's defaults). */
function withOptions(script) {
  return Object.keys(state.jobOptions || {}).length ? { ...script, options: state.jobOptions } : script;
}

// ------------------------------------------------------------------ saved settings (server presets)

/** The presets saved on the server, offered in the Run panel; `keep` is selected when present. */
async function loadSavedPresets(keep) {
  const reply = await api("GET", "/v1/presets").catch(() => null);
  state.savedPresets = reply && reply.ok ? reply.data.data : [];
  const select = document.getElementById("saved-select");
  select.replaceChildren(el("option", { value: "" }, t("none")),
    ...state.savedPresets.map((p) => el("option", { value: p.name, title: p.description || "" }, p.name)));
  select.value = state.savedPresets.some((p) => p.name === keep) ? keep : "";
}

/** Choosing saved settings sets the backend, the size and the options a job is sent with. */
function useSavedPreset() {
  const preset = state.savedPresets.find((p) => p.name === document.getElementById("saved-select").value);
  state.jobOptions = preset ? { ...preset.options } : {};
  if (preset) {
    document.getElementById("backend-select").value = preset.backend;
    document.getElementById("preset-select").value = preset.size || "";
  }
  showRenderPlan();
}

async function saveCurrentPreset() {
  const name = document.getElementById("saved-name").value.trim();
  const error = document.getElementById("submit-error");
  if (!/^[a-z0-9][a-z0-9_-]{0,39}$/.test(name)) { error.hidden = false; error.textContent = t("saved_preset_bad"); return; }
  const body = { backend: document.getElementById("backend-select").value, options: state.jobOptions || {},
    size: document.getElementById("preset-select").value || null };
  const reply = await api("PUT", `/v1/presets/${encodeURIComponent(name)}`, body);
  if (!reply.ok) { error.hidden = false; error.textContent = errorText(reply); return; }
  error.hidden = true;
  await loadSavedPresets(name);
}

async function submitRun() {
  const error = document.getElementById("submit-error");
  error.hidden = true;
  if (state.check !== "ok") return;
  const reply = await submitJob(state.script, document.getElementById("backend-select").value, document.getElementById("preset-select").value);
  if (!reply.ok) {
    error.hidden = false;
    error.textContent = errorText(reply);
    if (reply.data && reply.data.issues) { state.issues = reply.data.issues.map((i) => ({ ...i, source: "script" })); showIssues(); setCheck("bad"); }
    return;
  }
  const ids = JSON.parse(localStorage.getItem("daotai.jobs") || "[]");
  ids.unshift(reply.data.id);
  localStorage.setItem("daotai.jobs", JSON.stringify(ids.slice(0, 20)));
  trackJob(reply.data.id, reply.data);
}

/** Follow a job: show it now, then refresh it on every server-sent event until it ends. */
function trackJob(id, initial) {
  const entry = { id, job: initial || null, node: el("div", { class: "job", dataset: { job: id } }), source: null, qc: null,
    live: { preview: null, clips: {}, nodes: {}, img: null } };
  state.jobs[id] = entry;
  document.getElementById("job-list").prepend(entry.node);
  renderJob(entry);
  refreshJob(entry);
  const source = new EventSource(`/v1/jobs/${id}/events`);
  entry.source = source;
  const refresh = debounce(() => refreshJob(entry), 100);
  for (const kind of ["status", "progress", "planned", "output", "notice"]) source.addEventListener(kind, refresh);
  // What the job is doing now ("rendering shot 3/7 (s03)", "checking shot 2/7 (s02)"), beside its percentage.
  source.addEventListener("progress", (event) => {
    try { entry.stage = JSON.parse(event.data).label || entry.stage; } catch { /* a malformed event changes nothing */ }
  });
  // While it runs: the frame being rendered, and each shot's clip the moment it is encoded.
  source.addEventListener("preview", (event) => {
    try { entry.live.preview = JSON.parse(event.data); renderJob(entry); } catch { /* a malformed event changes nothing */ }
  });
  source.addEventListener("output", (event) => {
    try {
      const data = JSON.parse(event.data);
      if (data.live && data.shot_id) { entry.live.clips[data.shot_id] = data.live; renderJob(entry); }
    } catch { /* a malformed event changes nothing */ }
  });
  // The server closes the stream when the job ends; stop the browser from reconnecting then.
  source.onerror = () => { if (entry.job && TERMINAL.has(entry.job.status)) source.close(); else refresh(); };
}

async function refreshJob(entry) {
  const reply = await api("GET", `/v1/jobs/${entry.id}`);
  if (!reply.ok) return;
  entry.job = reply.data;
  if (TERMINAL.has(entry.job.status)) {
    if (entry.source) entry.source.close();
    if (entry.job.status === "completed" && !entry.planShown) { entry.planShown = true; showRenderPlan(); }
    if (entry.job.status === "completed" && entry.qc === null && entry.job.outputs.some((o) => o.name === "qc")) {
      const qc = await api("GET", `/v1/jobs/${entry.id}/files/qc`);
      entry.qc = qc.ok ? qc.data : false;
    }
  }
  renderJob(entry);
}

function progressRow(label, percent, cls) {
  return [
    el("span", {}, label),
    el("div", { class: "bar-outer" }, (() => { const inner = el("div", { class: `bar-inner ${cls || ""}` }); inner.style.width = `${percent}%`; return inner; })()),
    el("span", { class: "percent" }, `${percent}%`),
  ];
}

function renderJob(entry) {
  const job = entry.job;
  const node = entry.node;
  if (!job) { node.replaceChildren(el("span", {}, entry.id)); return; }
  const head = el("div", { class: "job-head" },
    el("strong", {}, job.id.slice(0, 14)),
    el("span", { class: "job-status", dataset: { status: job.status } }, t(`status_${job.status}`)),
    el("div", { class: "bar-outer" }, (() => { const inner = el("div", { class: "bar-inner" }); inner.style.width = `${job.progress}%`; return inner; })()),
    el("span", { class: "job-progress", dataset: { progress: job.progress } }, `${job.progress}%`),
    !TERMINAL.has(job.status) && entry.stage ? el("span", { class: "job-stage" }, entry.stage) : null,
    TERMINAL.has(job.status) ? null : el("button", { type: "button", onclick: () => api("DELETE", `/v1/jobs/${job.id}`).then(() => refreshJob(entry)) }, t("cancel")),
  );
  const shots = el("div", { class: "shot-progress" }, ...job.shots.flatMap((s) => progressRow(s.shot_id, s.frames ? Math.round((100 * s.done) / s.frames) : 0)));
  const parts = [head, shots];
  if (job.error) parts.push(el("p", { class: "error" }, `${job.error.code}: ${job.error.message}`));
  if (job.status === "completed") parts.push(renderResults(entry));
  else if (!TERMINAL.has(job.status)) parts.push(renderLive(entry, job));
  node.replaceChildren(...parts);
}

/** A running job's frame being rendered and its shots' clips so far. The nodes are kept between
 * redraws (a progress event redraws the job several times a second): a clip being watched plays on,
 * and the picture is fetched again only when a newer one was written. */
function renderLive(entry, job) {
  const live = entry.live;
  const ids = job.shots.map((s) => s.shot_id).filter((id) => live.clips[id]);
  if (!live.preview && !ids.length) return null;
  const base = `/v1/jobs/${encodeURIComponent(job.id)}/live/`;
  let frame = null;
  if (live.preview) {
    if (!live.img) live.img = el("img", { class: "live-preview", alt: t("live_frame") });
    if (live.img.dataset.n !== String(live.preview.n)) {
      live.img.src = `${base}preview?n=${live.preview.n}`;
      live.img.dataset.n = String(live.preview.n);
    }
    frame = el("figure", { class: "live-frame" }, live.img,
      el("figcaption", {}, live.preview.step
        ? t("live_caption_denoise", { s: live.preview.shot_id, k: live.preview.step, n: live.preview.steps })
        : t("live_caption", { s: live.preview.shot_id, f: live.preview.index + 1 })));
  }
  const clips = ids.map((id) => {
    if (!live.nodes[id]) {
      live.nodes[id] = el("figure", { dataset: { shot: id } },
        el("video", { controls: true, muted: true, preload: "metadata", src: base + encodeURIComponent(live.clips[id]) }),
        el("figcaption", {}, id));
    }
    return live.nodes[id];
  });
  return el("div", { class: "live" }, el("h3", {}, t("live")), frame, ids.length ? el("div", { class: "clips live-clips" }, ...clips) : null);
}

function fileUrl(job, name) {
  return `/v1/jobs/${job.id}/files/${encodeURIComponent(name)}`;
}

function kindLabel(kind) {
  const key = `kind_${kind}`;
  const text = t(key);
  return text === key ? String(kind).replace(/_/g, " ") : text;
}

function downloadLink(job, o, text) {
  return el("a", { href: fileUrl(job, o.name), download: "", dataset: { output: o.name, kind: o.kind || "" }, title: o.name }, text);
}

function renderResults(entry) {
  const job = entry.job;
  const names = new Set(job.outputs.map((o) => o.name));
  const player = el("div", { class: "sequence" }, el("h3", {}, t("sequence")),
    names.has("video") ? el("video", { class: "sequence-player", controls: true, preload: "metadata", src: fileUrl(job, "video") },
      // the dialogue's subtitles (written only when the script has dialogue), shown by default
      names.has("vtt") ? el("track", { kind: "subtitles", label: t("subtitles"), src: fileUrl(job, "vtt"), default: true }) : null) : null);
  const clips = el("div", {}, el("h3", {}, t("clips")), el("div", { class: "clips" },
    ...job.outputs.filter((o) => o.kind === "shot").map((o) => el("figure", {},
      el("video", { controls: true, preload: "metadata", src: fileUrl(job, o.name) }), el("figcaption", {}, o.shot_id)))));
  const contact = names.has("contact_sheet")
    ? el("div", { class: "contact" }, el("h3", {}, t("contact_sheet")),
      el("button", { type: "button", class: "sheet-open", title: t("open_full"), "aria-label": t("open_full"), onclick: () => openSheet(fileUrl(job, "contact_sheet")) },
        el("img", { src: fileUrl(job, "contact_sheet"), alt: t("contact_sheet") })),
      el("div", { class: "card-actions" },
        el("button", { type: "button", class: "sheet-full", onclick: () => openSheet(fileUrl(job, "contact_sheet")) }, t("open_full")),
        el("button", { type: "button", class: "boards-btn", onclick: () => openBoards(entry) }, t("boards"))))
    : null;
  return el("div", { class: "results" }, player, clips, contact, renderQc(entry.qc), renderDownloads(job));
}

/** Every deliverable: the whole render's files, then a table of each shot's files by kind. */
function renderDownloads(job) {
  const size = (o) => ` (${(o.bytes / 1024).toFixed(1)} KiB)`;
  const whole = job.outputs.filter((o) => !o.shot_id);
  const perShot = job.outputs.filter((o) => o.shot_id);
  const kinds = [...new Set(perShot.map((o) => o.kind))];
  const shotIds = [...new Set(perShot.map((o) => o.shot_id))];
  const table = perShot.length ? el("table", { class: "shot-files" },
    el("thead", {}, el("tr", {}, el("th", {}, t("shot")), ...kinds.map((k) => el("th", {}, kindLabel(k))))),
    el("tbody", {}, ...shotIds.map((id) => el("tr", {}, el("th", {}, id), ...kinds.map((k) => {
      const o = perShot.find((p) => p.shot_id === id && p.kind === k);
      return el("td", {}, o ? [downloadLink(job, o, o.name.split(".")[0]), el("span", { class: "bytes" }, size(o))] : "—");
    }))))) : null;
  return el("div", { class: "downloads-box" }, el("h3", {}, t("downloads")),
    el("h4", {}, t("whole_render")),
    el("ul", { class: "downloads" }, ...whole.map((o) => el("li", {}, downloadLink(job, o, kindLabel(o.kind || o.name)), el("span", { class: "bytes" }, ` ${o.name}${size(o)}`)))),
    table ? el("h4", {}, t("per_shot")) : null, table ? el("div", { class: "table-wrap" }, table) : null);
}

/** The contact sheet at its own size, in a dialog that scrolls. */
function openSheet(url) {
  const dialog = document.getElementById("sheet-dialog");
  dialog.replaceChildren(
    el("div", { class: "dialog-bar" },
      el("a", { href: url, target: "_blank", rel: "noopener" }, t("open_tab")),
      el("button", { type: "button", class: "dialog-close", onclick: () => dialog.close() }, t("close"))),
    el("div", { class: "dialog-body" }, el("img", { class: "sheet-full-img", src: url, alt: t("contact_sheet") })));
  dialog.showModal();
}

// QC failures, sorted into the check each belongs to (the report's failure texts say which).
const QC_CHECKS = [
  ["file", (f) => f.startsWith("cannot read")],
  ["format", (f) => /^(size |fps |\d+ frames, the plan)/.test(f)],
  ["picture", (f) => /black frame|green frame|frozen/.test(f)],
  ["camera", (f) => f.startsWith("camera:")],
  ["fidelity", (f) => /encode fidelity|sampled frames/.test(f)],
  ["sound", (f) => /^(audio|sound)\b/i.test(f)],
  ["identity", (f) => f.startsWith("identity:")],
];

function qcCheckOf(failure) {
  const hit = QC_CHECKS.find(([, test]) => test(failure));
  return hit ? hit[0] : "other";
}

/** One shot's checks, one verdict each, failing ones first with their reasons. */
function shotChecks(shot) {
  const failures = shot.failures || [];
  const checks = [];
  const add = (name, present, okText) => {
    const reasons = failures.filter((f) => qcCheckOf(f) === name).map((f) => f.replace(/^(camera|identity):\s*/, ""));
    if (!present && !reasons.length) return;
    checks.push({ name, ok: reasons.length === 0, text: reasons.length ? reasons.join("; ") : okText });
  };
  add("file", false, "");
  if (shot.format) add("format", true, t("ok_format", { w: shot.format.width, h: shot.format.height, fps: shot.format.fps, n: shot.format.frames }));
  add("picture", !!shot.frames, t("ok_picture"));
  const cam = shot.camera;
  if (cam) {
    const error = typeof cam.error_mean_px === "number" ? ` (${t("cam_error", { e: cam.error_mean_px.toFixed(2) })})` : "";
    const reasons = failures.filter((f) => qcCheckOf(f) === "camera").map((f) => f.replace(/^camera:\s*/, ""));
    const ok = cam.ok !== false && !reasons.length;
    checks.push({ name: "camera", ok, text: ok ? `${t("cam_ok")}${error}` : `${t("cam_bad")}: ${reasons[0] || cam.summary || ""}` });
  }
  add("fidelity", !!shot.fidelity, shot.fidelity ? t("ok_fidelity", { db: shot.fidelity.psnr_mean_db }) : "");
  add("sound", !!shot.audio, t("ok_sound"));
  // a character's look, compared with the other shots that show them (the verdict's own words)
  const look = (shot.verdicts || []).find((v) => v.check === "identity");
  add("identity", !!look, look ? look.text.replace(/^identity:\s*/, "") : "");
  add("other", false, "");
  return checks.sort((a, b) => Number(a.ok) - Number(b.ok));
}

/** The qc report in plain words: overall, then per shot one line per check, failures first. */
function renderQc(qc) {
  if (!qc) return null;
  const items = (qc.shots || []).map((shot) => {
    const cam = shot.camera;
    const checks = shotChecks(shot);
    return el("li", { class: shot.ok ? "qc-ok" : "qc-bad", dataset: { shot: shot.shot_id, camera: cam ? String(cam.ok) : "none" } },
      el("strong", {}, `${shot.shot_id}: `), el("span", { class: "verdict" }, shot.ok ? t("verdict_ok") : t("verdict_bad")),
      el("div", { class: "qc-checks" }, ...checks.map((c) => el("div", { class: `qc-check ${c.ok ? "qc-ok" : "qc-bad"}`, dataset: { check: c.name, verdict: c.ok ? "ok" : "failed" } },
        el("span", { class: "mark-ok", "aria-hidden": "true" }, c.ok ? "✓ " : "✗ "),
        el("span", { class: "check-name" }, `${t(`check_${c.name}`)}: `), el("span", {}, c.text)))));
  });
  const seq = qc.sequence;
  const seqLine = seq ? el("p", { class: seq.ok ? "qc-ok" : "qc-bad", dataset: { check: "sequence", verdict: seq.ok ? "ok" : "failed" } },
    `${seq.ok ? "✓" : "✗"} ${t("sequence_check")}: ${seq.ok ? t("verdict_ok") : (seq.failures || []).join("; ")}`) : null;
  return el("div", { class: "qc" }, el("h3", {}, t("qc")),
    el("p", { class: qc.ok ? "qc-ok" : "qc-bad" }, qc.ok ? t("qc_passed") : t("qc_failed")),
    el("ul", { class: "qc-list" }, ...items), seqLine, identityLine(qc.identity));
}

/** Each character's identity score: the largest difference of their look between two shots. */
function identityLine(identity) {
  const characters = Object.entries((identity && identity.characters) || {});
  if (!characters.length) return null;
  const ok = characters.every(([, c]) => c.ok);
  const scores = characters.map(([id, c]) => `${id} ${c.score === null ? t("identity_one_shot") : c.score.toFixed(1)}`);
  return el("p", { class: `qc-identity ${ok ? "qc-ok" : "qc-bad"}`, dataset: { check: "identity", verdict: ok ? "ok" : "failed" } },
    `${ok ? "✓" : "✗"} ${t("identity_scores", { max: identity.threshold })}: ${scores.join(", ")}`);
}

// ------------------------------------------------------------------ storyboard pages

/** The move in a few words, from the plan's resolved move (the contact sheet's wording). */
function moveWords(move) {
  const [x, y, z] = move.motion || [0, 0, 0];
  const [pan, tilt, roll] = move.rotate || [0, 0, 0];
  const d = (word) => plainLabel(word);
  switch (move.type) {
    case "pan": return t("move_pan", { d: d(pan > 0 ? "right" : "left") });
    case "tilt": return t("move_tilt", { d: d(tilt > 0 ? "up" : "down") });
    case "roll": return t("move_roll", { d: d(roll > 0 ? "right" : "left") });
    case "dolly": return t("move_dolly", { d: d(z < 0 ? "in" : "out") });
    case "truck": return t("move_truck", { d: d(x > 0 ? "right" : "left") });
    case "pedestal": return t("move_pedestal", { d: d(y > 0 ? "up" : "down") });
    case "crane": return t("move_crane", { d: d(y > 0 ? "up" : "down") });
    case "orbit": return t("move_orbit", { a: `${move.orbit > 0 ? "+" : ""}${move.orbit}` });
    case "zoom": return t("move_zoom", { d: d(move.fov_end < move.fov ? "in" : "out"), a: move.fov, b: move.fov_end });
    case "dolly_zoom": return t("move_dolly_zoom", { d: d(z < 0 ? "in" : "out") });
    case "handheld": return t("move_handheld", { a: move.shake });
    case "follow": return t("move_follow");
    default: return t("move_static");
  }
}

/** The middle frame of a shot's video as a data URL (the frame the contact sheet shows), or null. */
function middleFrame(url, width) {
  return new Promise((resolve) => {
    const video = el("video", { muted: true, preload: "auto", src: url });
    const done = (value) => { video.removeAttribute("src"); video.load(); resolve(value); };
    const timer = setTimeout(() => done(null), 15000);
    video.addEventListener("error", () => { clearTimeout(timer); done(null); });
    video.addEventListener("loadedmetadata", () => { video.currentTime = video.duration / 2; });
    video.addEventListener("seeked", () => {
      clearTimeout(timer);
      const canvas = el("canvas", { width, height: Math.round((width * video.videoHeight) / video.videoWidth) });
      canvas.getContext("2d").drawImage(video, 0, 0, canvas.width, canvas.height);
      done(canvas.toDataURL("image/jpeg", 0.9));
    }, { once: true });
  });
}

/** Printable board pages (N shots a page): frame, shot id, framing, move, duration, action, dialogue, transition. */
async function openBoards(entry) {
  const job = entry.job;
  const box = document.getElementById("boards");
  box.hidden = false;
  box.dataset.ready = "false";
  document.body.classList.add("boards-open");
  box.replaceChildren(el("p", {}, t("boards_loading")));
  const plan = await api("GET", fileUrl(job, "plan"));
  if (!plan.ok) { box.replaceChildren(el("p", { class: "error" }, errorText(plan))); return; }
  const frames = {};
  for (const shot of plan.data.shots) {
    const video = job.outputs.find((o) => o.kind === "shot" && o.shot_id === shot.shot_id);
    frames[shot.shot_id] = video ? await middleFrame(fileUrl(job, video.name), 480) : null;
  }
  entry.boards = { plan: plan.data, frames, perPage: entry.boards ? entry.boards.perPage : 6 };
  drawBoards(entry);
}

// A board page as a PNG: A4 landscape at 150 dpi, drawn the way the printed page is laid out.
const BOARD_PNG = { width: 1754, height: 1240, margin: 60 };

/** The panel's caption lines (shot, framing, move, duration; action; dialogue; transition), as on the printed page. */
function boardLines(shot, names) {
  const lines = [{ text: `${shot.index + 1}. ${shot.shot_id} · ${plainLabel(shot.framing)} · ${moveWords(shot.move)} · ${shot.duration_s} s`, bold: true }];
  if (shot.action) lines.push({ text: shot.action });
  for (const l of (shot.sound && shot.sound.dialogue) || []) lines.push({ text: `${names[l.character] || l.character}: “${l.line}”`, italic: true });
  if (shot.transition && shot.transition.type !== "cut") lines.push({ text: t("transition_in", { t: `${plainLabel(shot.transition.type)} ${shot.transition.duration_s} s` }), dim: true });
  return lines;
}

/** Break text into lines that fit `width` (words for spaced scripts, characters for Chinese). */
function wrapText(ctx, text, width) {
  const tokens = text.match(/[\u3000-\u9fff\uff00-\uffef]|[^\s\u3000-\u9fff\uff00-\uffef]+\s*|\s+/g) || [];
  const lines = [];
  let line = "";
  for (const token of tokens) {
    if (line && ctx.measureText(line + token).width > width) { lines.push(line.trimEnd()); line = token.trimStart(); }
    else line += token;
  }
  if (line.trim()) lines.push(line.trimEnd());
  return lines;
}

function loadImage(src) {
  return new Promise((resolve) => { const img = new Image(); img.onload = () => resolve(img); img.onerror = () => resolve(null); img.src = src; });
}

async function downloadBoardPng(entry, pages, p) {
  const { plan, frames, perPage } = entry.boards;
  const { width, height, margin } = BOARD_PNG;
  const canvas = el("canvas", { width, height });
  const ctx = canvas.getContext("2d");
  const font = getComputedStyle(document.documentElement).fontFamily;
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = "#111";
  ctx.font = `bold 30px ${font}`;
  ctx.fillText(plan.title, margin, margin + 24);
  ctx.font = `24px ${font}`;
  const pageText = t("board_page", { n: p + 1, m: pages.length });
  ctx.fillText(pageText, width - margin - ctx.measureText(pageText).width, margin + 24);
  ctx.fillRect(margin, margin + 38, width - 2 * margin, 3);
  const columns = perPage <= 4 ? 2 : perPage <= 9 ? 3 : 4;
  const rows = Math.ceil(perPage / columns);
  const gap = 28;
  const cellW = (width - 2 * margin - gap * (columns - 1)) / columns;
  const cellH = (height - margin * 2 - 60 - gap * (rows - 1)) / rows;
  const names = Object.fromEntries((plan.characters || []).map((c) => [c.id, c.name || c.id]));
  for (const [k, shot] of pages[p].entries()) {
    const x = margin + (k % columns) * (cellW + gap);
    const y = margin + 60 + Math.floor(k / columns) * (cellH + gap);
    const frameH = Math.min(cellW * (plan.height / plan.width), cellH * 0.62);
    const frameW = frameH * (plan.width / plan.height);
    ctx.fillStyle = "#222";
    ctx.fillRect(x, y, cellW, frameH);
    const img = frames[shot.shot_id] ? await loadImage(frames[shot.shot_id]) : null;
    if (img) ctx.drawImage(img, x + (cellW - frameW) / 2, y, frameW, frameH);
    let ty = y + frameH + 26;
    const size = columns >= 4 ? 17 : 20;
    for (const line of boardLines(shot, names)) {
      ctx.font = `${line.bold ? "bold " : ""}${line.italic ? "italic " : ""}${size}px ${font}`;
      ctx.fillStyle = line.dim ? "#555" : "#111";
      for (const piece of wrapText(ctx, line.text, cellW)) {
        if (ty > y + cellH) break;
        ctx.fillText(piece, x, ty);
        ty += size * 1.3;
      }
    }
  }
  const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
  const url = URL.createObjectURL(blob);
  const link = el("a", { href: url, download: `${(plan.title || "boards").replace(/[^\w\u4e00-\u9fff-]+/g, "_")}_board_${p + 1}.png` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** A board's frame (or an empty box) in the plan's own aspect ratio. */
function frameBox(src, alt, plan) {
  const node = src ? el("img", { src, alt }) : el("div", { class: "board-blank" });
  node.style.aspectRatio = `${plan.width} / ${plan.height}`;
  return node;
}

function drawBoards(entry) {
  const box = document.getElementById("boards");
  const { plan, frames, perPage } = entry.boards;
  const pages = [];
  for (let k = 0; k < plan.shots.length; k += perPage) pages.push(plan.shots.slice(k, k + perPage));
  const names = Object.fromEntries((plan.characters || []).map((c) => [c.id, c.name || c.id]));
  const per = el("select", { class: "boards-per-page" }, ...[4, 6, 8, 9, 12].map((n) => el("option", { value: n }, String(n))));
  per.value = String(perPage);
  per.addEventListener("change", () => { entry.boards.perPage = Number(per.value); drawBoards(entry); });
  const tools = el("div", { class: "boards-tools" },
    el("strong", {}, t("boards")),
    el("label", { class: "inline" }, t("boards_per_page"), per),
    el("button", { type: "button", class: "primary boards-print", onclick: () => window.print() }, t("boards_print")),
    ...pages.map((_, p) => el("button", { type: "button", class: "boards-png", dataset: { page: p + 1 }, onclick: () => downloadBoardPng(entry, pages, p) },
      pages.length > 1 ? t("boards_png_n", { n: p + 1 }) : t("boards_png"))),
    el("button", { type: "button", class: "boards-close", onclick: () => { box.hidden = true; document.body.classList.remove("boards-open"); } }, t("close")));
  const columns = perPage <= 4 ? 2 : perPage <= 9 ? 3 : 4;
  box.replaceChildren(tools, ...pages.map((shots, p) => el("article", { class: `board-page cols-${columns}` },
    el("header", { class: "board-head" }, el("strong", {}, plan.title), el("span", {}, t("board_page", { n: p + 1, m: pages.length }))),
    el("div", { class: "board-grid" }, ...shots.map((shot) => el("figure", { class: "board-panel", dataset: { shot: shot.shot_id } },
      frameBox(frames[shot.shot_id], shot.shot_id, plan),
      el("figcaption", {}, ...boardLines(shot, names).map((line) => el("div", {
        class: line.bold ? "board-line" : line.italic ? "board-dialogue" : line.dim ? "board-transition" : "board-action" }, line.text)))))))));
  box.dataset.ready = "true";
  box.scrollIntoView({ block: "start" });
}

// ------------------------------------------------------------------ quick preview

/** Quick preview: the one shot alone at the small preset through previz, shown in its card. */
async function previewShot(i) {
  const shot = state.script.shots[i];
  const script = { ...JSON.parse(JSON.stringify(state.script)), shots: [JSON.parse(JSON.stringify(shot))] };
  delete script.shots[0].transition;
  const reply = await submitJob(script, "previz", "preview");
  const id = shot.shot_id;
  if (!reply.ok) {
    state.previews[id] = { error: errorText(reply) };
    updatePreview(id);
    return;
  }
  state.previews[id] = { job: reply.data };
  updatePreview(id);
  const poll = async () => {
    const status = await api("GET", `/v1/jobs/${reply.data.id}`);
    if (!status.ok) return;
    state.previews[id] = { job: status.data };
    updatePreview(id);
    if (!TERMINAL.has(status.data.status)) setTimeout(poll, 500);
  };
  setTimeout(poll, 300);
}

function updatePreview(shotId) {
  for (const box of document.querySelectorAll(`.preview[data-shot="${CSS.escape(shotId)}"]`)) renderPreview(box);
}

function renderPreview(box) {
  const preview = state.previews[box.dataset.shot];
  if (!preview) { box.replaceChildren(); return; }
  if (preview.error) { box.replaceChildren(el("span", { class: "error" }, preview.error)); return; }
  const job = preview.job;
  if (job.status === "completed") {
    box.replaceChildren(el("video", { class: "preview-video", controls: true, autoplay: true, muted: true, loop: true, src: fileUrl(job, "video") }));
  } else if (TERMINAL.has(job.status)) {
    box.replaceChildren(el("span", { class: "error" }, job.error ? job.error.message : job.status));
  } else {
    box.replaceChildren(el("span", {}, t("preview_running", { p: job.progress })));
  }
}

// ------------------------------------------------------------------ language, import/export, start-up

function applyLanguage() {
  document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
  for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  document.getElementById("lang-btn").textContent = state.lang === "zh" ? "English" : "中文";
  buildSelectors();
  renderEditor();
  for (const entry of Object.values(state.jobs)) renderJob(entry);
  const boards = Object.values(state.jobs).find((e) => e.boards);
  if (boards && !document.getElementById("boards").hidden) drawBoards(boards);
  setCheck(state.check === "ok" || state.check === "bad" ? state.check : "checking");
  showIssues();
  validate();
}

function toggleLanguage() {
  state.lang = state.lang === "zh" ? "en" : "zh";
  localStorage.setItem("daotai.lang", state.lang);
  applyLanguage();
}

async function loadExample() {
  const name = document.getElementById("example-select").value;
  const reply = await api("GET", `examples/${encodeURIComponent(name)}.json`);
  if (reply.ok) replaceScript(typeof reply.data === "string" ? JSON.parse(reply.data) : reply.data);
}

function exportScript() {
  const blob = new Blob([JSON.stringify(state.script, null, 2) + "\n"], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const name = `${(state.script.title || "script").replace(/[^\w\u4e00-\u9fff-]+/g, "_")}.json`;
  const link = el("a", { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function importScript(file) {
  try {
    replaceScript(JSON.parse(await file.text()));
  } catch (err) {
    setCheck("bad");
    document.getElementById("validation-status").textContent = `${file.name}: ${err.message}`;
  }
}

async function start() {
  try {
    const reply = await api("GET", "/v1/schema");
    if (reply.ok) {
      state.schema = reply.data.schema;
      state.aliases = reply.data.aliases || {};
      state.presets = reply.data.alias_presets || {};
      state.keyAliases = reply.data.key_aliases || {};
      chineseAliases = null;
      state.backends = reply.data.backends;
      state.sizePresets = reply.data.presets;
    }
  } catch (err) { /* shown below: the server does not answer */ }
  const draft = localStorage.getItem("daotai.draft");
  if (draft) { try { state.script = normalise(JSON.parse(draft)); } catch (err) { /* keep the default */ } }
  else state.script = normalise(state.script);
  document.getElementById("load-example").addEventListener("click", loadExample);
  document.getElementById("import-btn").addEventListener("click", () => document.getElementById("import-file").click());
  document.getElementById("import-file").addEventListener("change", (e) => { if (e.target.files[0]) importScript(e.target.files[0]); e.target.value = ""; });
  document.getElementById("export-btn").addEventListener("click", exportScript);
  document.getElementById("undo-btn").addEventListener("click", undo);
  document.getElementById("redo-btn").addEventListener("click", redo);
  document.getElementById("lang-btn").addEventListener("click", toggleLanguage);
  document.getElementById("add-character").addEventListener("click", () => {
    remember();
    const n = state.script.characters.length + 1;
    state.script.characters.push({ id: `char_${n}`, colour: PALETTE[(n - 1) % PALETTE.length] });
    changed(true);
  });
  document.getElementById("add-shot").addEventListener("click", () => {
    remember();
    state.script.shots.push({ shot_id: uniqueShotId("s"), duration: 2, camera: { type: "static" } });
    changed(true);
  });
  document.getElementById("submit-btn").addEventListener("click", submitRun);
  for (const id of ["backend-select", "preset-select"]) {
    document.getElementById(id).addEventListener("change", () => {
      // settings changed by hand are no longer the saved ones (their options may not fit another backend)
      document.getElementById("saved-select").value = "";
      state.jobOptions = {};
      showRenderPlan();
    });
  }
  document.getElementById("saved-select").addEventListener("change", useSavedPreset);
  document.getElementById("save-preset-btn").addEventListener("click", saveCurrentPreset);
  await loadSavedPresets();
  // A file dropped beside a drop zone must not make the browser navigate away to it.
  for (const kind of ["dragover", "drop"]) {
    window.addEventListener(kind, (e) => { if (e.dataTransfer && [...e.dataTransfer.types].includes("Files")) e.preventDefault(); });
  }
  document.addEventListener("keydown", (e) => {
    if (!(e.ctrlKey || e.metaKey) || ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)) return;
    if (e.key === "z" && !e.shiftKey) { e.preventDefault(); undo(); }
    else if (e.key === "y" || (e.key === "z" && e.shiftKey)) { e.preventDefault(); redo(); }
  });
  window.addEventListener("resize", debounce(drawAllStages, 150));
  applyLanguage();
  updateUndoButtons();
  for (const id of JSON.parse(localStorage.getItem("daotai.jobs") || "[]").slice(0, 5).reverse()) {
    const probe = await api("GET", `/v1/jobs/${id}`).catch(() => null);
    if (probe && probe.ok) trackJob(id, probe.data);
  }
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);

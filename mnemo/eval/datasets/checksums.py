"""sha256 of every benchmark file whose README gives one, in this folder's layout and upstream's.

The values are copied from the data READMEs (`$MNEMO_DATA_DIR/README.md`, `<name>/README.md`,
`<name>/SHA256SUMS`). Files copied byte for byte from upstream have the same hash in both layouts;
files re-serialised when the held-out part was split off (LoCoMo, MQuAKE-hard) have their own.
"""

from __future__ import annotations

# Shared layout: dataset folder -> path inside it -> sha256.
SHARED: dict[str, dict[str, str]] = {
    "locomo": {
        "locomo10_shared_8conv.json": "80eb7a1f62c5baa5ae2ebdfbc8f3fbe1b1f1006ab9d5dc800069e27e024d56f4",
        # Not listed in the LoCoMo README, but byte-identical to prefeval/LICENSE.txt (same CC BY-NC 4.0 text).
        "LICENSE.txt": "41003d4a74749c0220e33dd415042164b5a1093ed401f36277234f772d22d3d0",
    },
    "realtalk": {
        "Chat_1_Emi_Elise.json": "4e947998a751a1ba2c3710fc873b90fbcbc234fda7a5e4e75db2b762e0f25a36",
        "Chat_2_Kevin_Elise.json": "4ac6e319c206731aa9a025c93325eb1edb43686cf39473f058c87ae7deb2d62a",
        "Chat_3_Kevin_Paola.json": "10c9208016538cbe7a28aafa6cfd72587b072677964c36ec242159fdf58961f2",
        "Chat_4_Emi_Paola.json": "80aa012ed6a918f5b317bd942b4d4811a158d27a6e07b7a5c6182994107a9367",
        "Chat_5_Nicolas_Nebraas.json": "32dd7c45786b1a26861dc1574a1bb698a855196fd2ae3fc0c091f3c9ab2d6d06",
        "Chat_6_Vanessa_Nicolas.json": "9d5ee072ab5a0667ef71d5644d7cd3a4c6777a1e6e2252bf306f310d982e40ac",
        "Chat_7_Nebraas_Vanessa.json": "b5716bb093217980e747dec0d98996829b569febc09587a025efc6b79806e9ce",
        "Chat_8_Akib_Muhhamed.json": "814f64ad7e8a46f0398f550fe84184e2ba495a292290b9ff96ffc95448280800",
    },
    "beam": {
        "128k/1/chat.json": "ea71efd5dcc13f7366d3737b45d532eadb3d1497f3d6f23d1fa1c4004d5ffdf2",
        "128k/1/probing_questions.json": "047398ff1497674b11585e7b4829c3d64d2d5e63f7f3572c826b73ca1faaf898",
        "128k/2/chat.json": "3a3bd796f4aa24e8f34e718dc2823ae942663349eb89054f03885051e2daf1c4",
        "128k/2/probing_questions.json": "d188e929644c9ef9fcd4520e7b5a3daf2c2e069b1247a324bd13d5aadd1ed96e",
        "128k/3/chat.json": "432d3ae5493c04a17a5b6b0ef7c012a70e70ac5cfcaef13059fca6bedb903009",
        "128k/3/probing_questions.json": "f53030f3753b0e0a93b330bc62d597cb66375c0c794094d7e69b7646df46e324",
        "128k/4/chat.json": "e0ef0f74b1f7ac911e8e0518722335c422cbc1112048e9909911b208c51fc027",
        "128k/4/probing_questions.json": "f69eda522cd7325830c8f78b6f02a571c992b6cf43311fa96f28043fd3c18dae",
        "128k/6/chat.json": "5365cdc41da212fb7143cf9f191ff7862eed8e9ca175b3728fe593adedc87871",
        "128k/6/probing_questions.json": "7a6f88dfdeb3f1b582209a745e7c980158dbb2829a9ceae6cdb08bb868a00035",
        "128k/7/chat_trunecated.json": "b3e2d90a1d27970161ec2f179f2a382833bb186a1fdf19b28dfc9cc6aefdf3af",
        "128k/7/probing_questions.json": "2c00219e839d54c7cd3e4fbb396f8a2517fd9f143d3a3b8ea1c4fb9f5c4435c7",
        "128k/8/chat.json": "3207b8f5aa45cd1b2d1e2f37f224831b4696d0cc2352ef514af08f2092b6c239",
        "128k/8/probing_questions.json": "d279dbd8fd293692d29f0057b3dd2468ccb97c7da6df28ae2adc8481d9970148",
        "128k/9/chat.json": "446777f3eed114c27d62030ad86cfb8ad6610fda0fc83dfe98403b8d68b74bd4",
        "128k/9/probing_questions.json": "b7ab1c7022c0b7ac6928f4c2efadd08e2a438dc91e1288209df066cdcd5e9573",
        "128k/11/chat_trunecated.json": "f3266874081e5a6048727e3cf4ceda9884b357042293f4d57ade9558ee4b9685",
        "128k/11/probing_questions.json": "3aa98a74a03be59472834422dd14004d3b432a0c800bbef8f316865834449c08",
        "128k/12/chat_trunecated.json": "0229c8ad4fbdd675304bf7832fa3e48a7512493897eb3b68f41d0cf947dcc6e0",
        "128k/12/probing_questions.json": "c36c9b1d4df0d063d1c7db81b35b5ea4743e38a804382d6e557f37ec46e1d6e3",
        "128k/13/chat.json": "aea586c143dab53cb5a021b3fab23380d5d9628fea1c4b718f91411019166dc6",
        "128k/13/probing_questions.json": "02dee0ba1d5576aed8ac535328a23fe4f882f6dcff3b96e039162e10d547236b",
        "128k/14/chat.json": "43fbffd9ca235a980203faf4c5d6f636e97af4f31f6d91d9cbe42035ab4f0b0d",
        "128k/14/probing_questions.json": "f30350303b4ccd52a36deaf57750a2bf6924fa5885da92d8230797a82dcfbe5f",
        "128k/16/chat_trunecated.json": "a90a86bfe313ce0f6082a69188a500fc2afad2fe86f2fdb1a21c7610ca2a3385",
        "128k/16/probing_questions.json": "abf20d16a37322112af0fe48f5c43be0d824d54ae2bb2c5e3e069c6e84c54033",
        "128k/17/chat_trunecated.json": "fb2067c1ee096dea1cff5cb0f9eafc88e7c6fea41014aebf9ac96ad4a30592bd",
        "128k/17/probing_questions.json": "7948981c2e40751bfe9ace82e53497d32229245e6012a2e5d4da2e801c929451",
        "128k/18/chat_trunecated.json": "0b6224918bb4ffa5e51f22b77d40881daeba233d664c7957fe8937a4a2d75ed2",
        "128k/18/probing_questions.json": "d813db9e2b416e6ac7cc22841b131ea5c80e5931e690f81bb37aa16c3b9edc3a",
        "128k/19/chat_trunecated.json": "dece8764492998bb88c2ec75597bc31c36629483ed1813a6dccdac78ce01bc34",
        "128k/19/probing_questions.json": "b911651b2b18e835aaac58b2bc3cb018bc782e252b9161dca8174961ca498ce2",
    },
    "mquake_hard": {
        "MQuAKE-hard_shared.json": "3e9f652313f66e4c64b512edf0422a67bea823ba84e783aede5121eaf2fce650",
        "LICENSE.MQuAKE.txt": "8872dbf8660b00890b5e07ce1ea1f7a44fa7ae4e1857da56caba172b51dab3cb",
    },
    "meme": {
        "sw033.json": "e8e439bdc19af09a42b2fe57209c8784ff9adb5785d3ebde0cb5250e396f6620",
        "main_results.json": "c552a2fa0fb20ac26faeefbb7f6b81f1be7a5a87f13b660a04b028260d30e909",
    },
    "prefeval": {
        "LICENSE.txt": "41003d4a74749c0220e33dd415042164b5a1093ed401f36277234f772d22d3d0",
        "explicit_preference/education_learning_styles.json": "fb27ac51b643e55bae4eddf5c390676798871afc6355c33b4e37e0cc65e9c598",
        "explicit_preference/education_resources.json": "31003f4ff78059bab13647ac07c22abca13465244c455381ef76da6799f2c678",
        "explicit_preference/entertain_games.json": "05578079fdedcf13a93d015bacf3123b3aaf34cf364a4339d7fdfbfcd9ad36e7",
        "explicit_preference/entertain_music_book.json": "5a3ba8a47ba6a0b7b6601840e88871a24ce3a7cdd22213d9ca1a6e6709cca7b4",
        "explicit_preference/entertain_sports.json": "a4f0ea9de29ec93974c4af451965c1c09d6e4939c61700bf357cd33549ab3991",
        "explicit_preference/lifestyle_beauty.json": "1b0332992a3a09e27c87e76d8c5f7227bcbad22e33ae931e6edc3560201f4e9a",
        "explicit_preference/lifestyle_dietary.json": "05ad1b4fdfb91b8a628a6eecc256d6118775b8860c8a5444a02ad2e3b1fd4880",
        "explicit_preference/lifestyle_fit.json": "c2ebae96b4f20fdc194f45999f84ef3bd27af2a77bfedbdb59a97d63bad7fb3a",
        "explicit_preference/pet_ownership.json": "d8576794ac196297548118fa6c4f38800f8494eae8fe18d70c99916c4d3da567",
        "explicit_preference/professional_work_location_style.json": "520eafd5e876d04784b40d5c1631dde783c85e2c8b32a65b18fa64e8ea5923c2",
        "explicit_preference/shop_fashion.json": "6b6bd4799b87207888320467caef6a84b0e2d9c568982c073e7460f50477f883",
        "explicit_preference/shop_home.json": "6ba88e7ff7e3d2022187cdaaa9a344fdead5ae221c3f93d5d147928647973602",
        "explicit_preference/shop_technology.json": "346ed91e69ecf5b7a741e20876f00bb20fbeff9cf1ed9d7318e7174845865653",
        "explicit_preference/travel_activities.json": "021cd1b1dc500f32bbdd46273f4dc1fdb9c3300e847e407d621ea27cd14ff081",
        "explicit_preference/travel_hotel.json": "743c975a6de64ea06c8538d1043457c691d9bdfbe668ec737f55a50f0ce558f7",
        "explicit_preference/travel_restaurant.json": "6079f577c7113fdc974192634eb11dd57aea85458be995e0393ca957ff551833",
        "filtered_inter_turns.json": "02feaf670dd07ef39e7f382331fa90f25194d21567e7ac31ecf486f71f534177",
        "implicit_preference/choice-based/education_learning_styles.json": "cdc856b918c679c3090f12f52742905db878fed05839c0eff87cf586b2b7ea2f",
        "implicit_preference/choice-based/education_resources.json": "75614c5caf3ca4b32bea991b212a96fecdb2047d53e5c91395504a2d24c4c561",
        "implicit_preference/choice-based/entertain_games.json": "14f19fd424b2310aead670afc0ee2e7c39f1e0150340793e4fbe9763fe11e4a9",
        "implicit_preference/choice-based/entertain_music_book.json": "68361e3a360f6b2e8f0527fdb98dd1d8814421fa9a45dad49767121da4f9a74c",
        "implicit_preference/choice-based/entertain_sports.json": "c7c3ba3522bb1e22a11408d2f049fa637aca00aa8924d7172d7691cc0d74b299",
        "implicit_preference/choice-based/lifestyle_beauty.json": "e51980935ebb1806f8577239d9a314081edc733cda9b8741723f53657e1ac0c8",
        "implicit_preference/choice-based/lifestyle_dietary.json": "9d4cc71e1e2d99c3755b9b435054dced973a11ca9de5668dbcc4a0dbed1bce3a",
        "implicit_preference/choice-based/lifestyle_fit.json": "3562e18a3862344d15434518ac1b2523988fa535b93cbbfa388a9453a7a90988",
        "implicit_preference/choice-based/pet_ownership.json": "6e17f111c6de8c58b1a03deae8087ee53eed48d3a6f162b9051a4299b4ce98ac",
        "implicit_preference/choice-based/professional_work_location_style.json": "340dbb1f4e6b6e176e493df22a9f8157b73ea612fd39a934df45543fc0b6984d",
        "implicit_preference/choice-based/shop_fashion.json": "6900618a2da89302e8f83aac1197fbfc3dd2db41f0b357760987002727965aed",
        "implicit_preference/choice-based/shop_home.json": "c6c8cdf64f39d3742871b5b3ecde1a256e69e876158da40ffbc796598d83f519",
        "implicit_preference/choice-based/shop_technology.json": "6944b6416e1fdbbaca7fe0e2b2cb10d88cd994568e968e0367e34631a47ff106",
        "implicit_preference/choice-based/travel_activities.json": "24973fd7875bbc88109b09f6cd91ba89cddb5da87b6e024fdd067e38b93cc76a",
        "implicit_preference/choice-based/travel_hotel.json": "679e5f4b54e5646f2757bf0053b0150ff4ac86544f9d099cf8c774abc043cb66",
        "implicit_preference/choice-based/travel_restaurant.json": "cddb4a9fdbe51f7cb5002d0f9ef971cced10010ddd81a7f72193e1ea772f4b8d",
        "implicit_preference/persona-driven/education_learning_styles.json": "d1d3b514095e5aa952c9ec1fcd87a8b5359d27bd7f212746698643857379494f",
        "implicit_preference/persona-driven/education_resources.json": "b2a17a544a294343ee47f9c85d0f3267aeaa7085cec5ce08b75c8b9dc43c4a3b",
        "implicit_preference/persona-driven/entertain_games.json": "7e2459846826319ef8159e850c741be2fbb2bc24a310b8a834af88528e3fac10",
        "implicit_preference/persona-driven/entertain_music_book.json": "95590c301a9eb584f48ba7037d796ec663e99f20afd1c8a03ef3ba3b09b839e6",
        "implicit_preference/persona-driven/entertain_sports.json": "b9e1c7cc8b2d9e7d875d99b7a2bf1aaa2a25aa2bb57a160e675a0b993bfcac8f",
        "implicit_preference/persona-driven/lifestyle_beauty.json": "1849363e66f1200e89a0dba468143656aaba7bfe03fb5edb0b7464871eb76305",
        "implicit_preference/persona-driven/lifestyle_dietary.json": "786a0d33f39115851f10c3f6159908bb031c539514306dacb2176570caced708",
        "implicit_preference/persona-driven/lifestyle_fit.json": "314cc68a4ab0ee60ed4e7b3bb38473959e989065c9193826873c3349701d5ae6",
        "implicit_preference/persona-driven/pet_ownership.json": "b1952faab503bdadc7e40d0883a9018b805c449a03d58705d6dbb225035bc245",
        "implicit_preference/persona-driven/professional_work_location_style.json": "061a70852e0caafbb7cb5ee0cfb5c4fd4581d735f5223cb734c1546cb124cacf",
        "implicit_preference/persona-driven/shop_fashion.json": "fe2cb8e71daef28c639f6536677871362e74ab0beb278292966233b208cbfd3e",
        "implicit_preference/persona-driven/shop_home.json": "0258a682a707ebc576be225b25b01929334a9d2ac1d1dfae3139220141656c57",
        "implicit_preference/persona-driven/shop_technology.json": "8e2e4930fc4ffa54ab9ca93ea2aac29682c18f6882d6637f50c3d9c7a0b741c1",
        "implicit_preference/persona-driven/travel_activities.json": "9f2a631c49f855ee3b0f574c905dcf5c6fca3c7a8373429e7145524cba9130f0",
        "implicit_preference/persona-driven/travel_hotel.json": "953b6a83f029dca137aeb450a7b2b59a02e36b8ee3f56f75d89aa5fde32219bd",
        "implicit_preference/persona-driven/travel_restaurant.json": "c09733b16ce4633272f5bd605cb3d3f71d110756a7960ccdfce73d01f565abdb",
        "mcq_options/education_learning_styles.json": "36c1f9d9121c88ae8d5534e13a7eca43b8659367f76816d34d6dc89b203b3ba0",
        "mcq_options/education_resources.json": "96d2c922f331a497290ac1fedee3dcb950fe1139f3009173969130fccc3cf4ba",
        "mcq_options/entertain_games.json": "d60a04b77ad82d338e3182d9717ef3ae36425b9c9f12a735e526548ca0bfbf1b",
        "mcq_options/entertain_music_book.json": "3aad8ca57fc3596bf4765bff4f31e53b90e83ab9df1b769777ad130077a6e0c4",
        "mcq_options/entertain_sports.json": "1357603248b8b60b2358f8ee3bbfeaab907ac2de7706739ccbe85a2957c9fbab",
        "mcq_options/lifestyle_beauty.json": "51f7ec952061df585f510c222e51c29ad80b96540404b984fb55085ec38a81d0",
        "mcq_options/lifestyle_dietary.json": "d3201163475aae5dd49021190838d81952913b86d1b7dd45a06a90ad7c49fb4c",
        "mcq_options/lifestyle_fit.json": "e1af67c5e6458d7bbaed6836ee0ce2c5c53bdba766e3aa117083573b59f22b02",
        "mcq_options/pet_ownership.json": "2beb37b0735284d5bdc75d47f8182e498b71dc034c2679a74083592adb90673a",
        "mcq_options/professional_work_location_style.json": "938a6c2c7a8a035e3ec4239a24e42d17a40d7b6bd5c221ae4f5fb050da52a197",
        "mcq_options/shop_fashion.json": "b3576f8387e85e7792007fa39152ea9dcb5bede2d370d9d92514a78b2b78d27b",
        "mcq_options/shop_home.json": "081cba1d648168f427d165e30d68e338aa026a0bf340aa1a65c3f21e36a36777",
        "mcq_options/shop_technology.json": "473c8959ed218c3e1d40ed47b4e0b95f202e5302b7948772868b1aa10088d970",
        "mcq_options/travel_activities.json": "4403e3761eccee1a55135b4aad924b68557696c198dfcba18807ddda27d2da04",
        "mcq_options/travel_hotel.json": "ce5cb3bb4003dcb1f720c12a31a519ea070440cbea46e670dc44b22763d1b56b",
        "mcq_options/travel_restaurant.json": "06e9c60a783ebd9e0b4691504e14e2b94a5c9574b7f4ed567d1dc154cdc902d6",
    },
}

# Upstream files that were re-serialised here, so their bytes (and hash) differ from the shared copy.
_UPSTREAM_ONLY: dict[str, dict[str, str]] = {
    "locomo": {"data/locomo10.json": "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"},
    "mquake_hard": {
        "datasets/MQuAKE-hard.json": "fc78dc7bec4625d3ce6e2923acae7f1920691b0b23e663182bf799f2856f2a11"
    },
}


def upstream_path(name: str, shared_path: str) -> str | None:
    """Return where a byte-copied shared file sits in upstream's repository, or None if it was re-serialised."""
    if name == "locomo":
        return "LICENSE.txt" if shared_path == "LICENSE.txt" else None
    if name == "realtalk":
        return f"data/{shared_path}"
    if name == "beam":
        # 128k/<n>/probing_questions.json was probing_questions/probing_questions.json upstream.
        _, n, leaf = shared_path.split("/")
        sub = "probing_questions/" if leaf == "probing_questions.json" else ""
        return f"chats/100K/{n}/{sub}{leaf}"
    if name == "mquake_hard":
        return "LICENSE" if shared_path == "LICENSE.MQuAKE.txt" else None
    if name == "meme":
        return f"src/data/{shared_path}"
    if name == "prefeval":
        return "LICENSE" if shared_path == "LICENSE.txt" else f"benchmark_dataset/{shared_path}"
    return None


def _upstream_table() -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {name: dict(files) for name, files in _UPSTREAM_ONLY.items()}
    for name, files in SHARED.items():
        for path, digest in files.items():
            up = upstream_path(name, path)
            if up is not None:
                table.setdefault(name, {})[up] = digest
    return table


# Upstream layout (what `download` writes): dataset folder -> upstream path -> sha256.
UPSTREAM: dict[str, dict[str, str]] = _upstream_table()


def known(name: str) -> dict[str, str]:
    """Return every known sha256 for dataset `name`, keyed by path inside its folder (both layouts)."""
    return {**SHARED.get(name, {}), **UPSTREAM.get(name, {})}

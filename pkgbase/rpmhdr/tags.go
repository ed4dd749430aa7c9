package rpmhdr

// Tag numbers of the RPM header (rpmtag.h) plus ALT's DISTTAG and the
// CRPMTAG_* tags apt-rpm adds to index entries.
const (
	// Region and signature-header tags. TagHeaderImage ends the
	// signature region of some old packages; rpm reads it as
	// TagHeaderSignatures there.
	TagHeaderImage      = 61
	TagHeaderSignatures = 62
	TagHeaderImmutable  = 63
	TagHeaderI18NTable  = 100

	SigSize        = 1000
	SigLeMD5_1     = 1001
	SigPGP         = 1002 // header+payload, RSA (legacy)
	SigLeMD5_2     = 1003
	SigMD5         = 1004 // header+payload
	SigGPG         = 1005 // header+payload, DSA (legacy)
	SigPGP5        = 1006
	SigPayloadSize = 1007
	SigDSA         = 267 // header only
	SigRSA         = 268 // header only
	SigSHA1        = 269 // header only, hex
	SigLongSize    = 270
	SigLongArchive = 271
	SigSHA256      = 273 // header only, hex
	SigOpenPGP     = 278 // rpm 6: any number of header-only signatures

	TagName              = 1000
	TagVersion           = 1001
	TagRelease           = 1002
	TagEpoch             = 1003
	TagSummary           = 1004
	TagDescription       = 1005
	TagBuildTime         = 1006
	TagBuildHost         = 1007
	TagSize              = 1009
	TagDistribution      = 1010
	TagVendor            = 1011
	TagLicense           = 1014
	TagPackager          = 1015
	TagGroup             = 1016
	TagURL               = 1020
	TagOS                = 1021
	TagArch              = 1022
	TagPreIn             = 1023
	TagPostIn            = 1024
	TagPreUn             = 1025
	TagPostUn            = 1026
	TagOldFilenames      = 1027
	TagFileSizes         = 1028
	TagFileModes         = 1030
	TagFileRdevs         = 1033
	TagFileMtimes        = 1034
	TagFileDigests       = 1035
	TagFileLinkTos       = 1036
	TagFileFlags         = 1037
	TagFileUserName      = 1039
	TagFileGroupName     = 1040
	TagSourceRPM         = 1044
	TagFileVerifyFlags   = 1045
	TagArchiveSize       = 1046
	TagProvideName       = 1047
	TagRequireFlags      = 1048
	TagRequireName       = 1049
	TagRequireVersion    = 1050
	TagConflictFlags     = 1053
	TagConflictName      = 1054
	TagConflictVersion   = 1055
	TagRPMVersion        = 1064
	TagTriggerScripts    = 1065
	TagTriggerName       = 1066
	TagTriggerVersion    = 1067
	TagTriggerFlags      = 1068
	TagTriggerIndex      = 1069
	TagVerifyScript      = 1079
	TagChangelogTime     = 1080
	TagChangelogName     = 1081
	TagChangelogText     = 1082
	TagPreInProg         = 1085
	TagPostInProg        = 1086
	TagPreUnProg         = 1087
	TagPostUnProg        = 1088
	TagObsoleteName      = 1090
	TagVerifyScriptProg  = 1091
	TagTriggerScriptProg = 1092
	TagCookie            = 1094
	TagFileDevices       = 1095
	TagFileInodes        = 1096
	TagFileLangs         = 1097
	TagSourcePackage     = 1106
	TagProvideFlags      = 1112
	TagProvideVersion    = 1113
	TagObsoleteFlags     = 1114
	TagObsoleteVersion   = 1115
	TagDirIndexes        = 1116
	TagBaseNames         = 1117
	TagDirNames          = 1118
	TagOptFlags          = 1122
	TagPayloadFormat     = 1124
	TagPayloadCompressor = 1125
	TagPayloadFlags      = 1126
	TagPlatform          = 1132
	TagPreTrans          = 1151
	TagPostTrans         = 1152
	TagPreTransProg      = 1153
	TagPostTransProg     = 1154
	TagDistTag           = 1155 // ALT: "<branch>+<task>.<subtask>.<try>.<iter>"
	TagLongFileSizes     = 5008
	TagLongSize          = 5009
	TagFileCaps          = 5010
	TagFileDigestAlgo    = 5011
	TagRecommendName     = 5046
	TagRecommendVersion  = 5047
	TagRecommendFlags    = 5048
	TagSuggestName       = 5049
	TagSuggestVersion    = 5050
	TagSuggestFlags      = 5051
	TagSupplementName    = 5052
	TagSupplementVersion = 5053
	TagSupplementFlags   = 5054
	TagEnhanceName       = 5055
	TagEnhanceVersion    = 5056
	TagEnhanceFlags      = 5057
	TagPayloadDigest     = 5092
	TagPayloadDigestAlgo = 5093
	TagPayloadDigestAlt  = 5097

	// apt-rpm index tags (CRPMTAG_*), only in pkglist/srclist entries.
	CRPMTagFilename  = 1000000
	CRPMTagFileSize  = 1000001
	CRPMTagMD5       = 1000005
	CRPMTagSHA1      = 1000006
	CRPMTagBLAKE2b   = 1000009
	CRPMTagDirectory = 1000010
	CRPMTagBinary    = 1000011
)

// Entry data types.
const (
	TypeNull        = 0
	TypeChar        = 1
	TypeInt8        = 2
	TypeInt16       = 3
	TypeInt32       = 4
	TypeInt64       = 5
	TypeString      = 6
	TypeBin         = 7
	TypeStringArray = 8
	TypeI18NString  = 9
)

// File flags (RPMFILE_*).
const (
	FileConfig    = 1 << 0
	FileDoc       = 1 << 1
	FileMissingOK = 1 << 3
	FileNoReplace = 1 << 4
	FileGhost     = 1 << 6
	FileLicense   = 1 << 7
	FileReadme    = 1 << 8
	FileArtifact  = 1 << 12
)

// Digest algorithms (PGPHASHALGO_*) used by FILEDIGESTALGO and PAYLOADDIGESTALGO.
const (
	HashMD5    = 1
	HashSHA1   = 2
	HashSHA256 = 8
	HashSHA384 = 9
	HashSHA512 = 10
	HashSHA224 = 11
)

// HashName names a PGPHASHALGO_* value.
func HashName(algo uint32) string {
	switch algo {
	case HashMD5:
		return "md5"
	case HashSHA1:
		return "sha1"
	case HashSHA256:
		return "sha256"
	case HashSHA384:
		return "sha384"
	case HashSHA512:
		return "sha512"
	case HashSHA224:
		return "sha224"
	}
	return "unknown"
}
